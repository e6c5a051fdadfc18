"""Entry point: ``python -m lawlab_judge`` (or ``lawlab serve judge``)."""

from lawlab.rpc.main import service_main

if __name__ == "__main__":
    service_main("judge")
