"""Entry point: ``python -m lawlab_agent`` (or ``lawlab serve agent``)."""

from lawlab.rpc.main import service_main

if __name__ == "__main__":
    service_main("agent")
