"""Entry point: ``python -m lawlab_sandbox`` (or ``lawlab serve sandbox``)."""

from lawlab.rpc.main import service_main

if __name__ == "__main__":
    service_main("sandbox")
