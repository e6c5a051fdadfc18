"""Entry point: ``python -m lawlab_simulator`` (or ``lawlab serve simulator``)."""

from lawlab.rpc.main import service_main

if __name__ == "__main__":
    service_main("simulator")
