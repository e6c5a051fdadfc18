"""Entry point: ``python -m lawlab_scorer`` (or ``lawlab serve scorer``)."""

from lawlab.rpc.main import service_main

if __name__ == "__main__":
    service_main("scorer")
