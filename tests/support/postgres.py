"""A real PostgreSQL server for tests: initdb in a temp folder, on a free loopback port."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def postgres_server() -> Iterator[str]:
    """Yields a postgresql:// URL; stops the server and removes its files after."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL is not installed; run `make install` (apt package postgresql)")
    bindir = Path(found[-1]).parent
    base = Path(tempfile.mkdtemp(prefix="lawlab-pg-"))
    prefix: list[str] = []
    if os.geteuid() == 0:  # postgres refuses to run as root
        shutil.chown(base, "postgres", "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    data = base / "data"
    subprocess.run([*prefix, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U",
                    "lawlab", "--no-sync"], check=True, capture_output=True)
    server = subprocess.Popen([*prefix, str(bindir / "postgres"), "-D", str(data), "-k", str(base),
                               "-p", str(port), "-h", "127.0.0.1", "-c", "fsync=on"],
                              stdout=subprocess.DEVNULL, stderr=open(base / "server.log", "wb"))
    try:
        deadline = time.monotonic() + 30
        while subprocess.run([str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                             capture_output=True).returncode != 0:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL did not start: "
                                   + (base / "server.log").read_text()[-2000:])
            time.sleep(0.2)
        subprocess.run([str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "lawlab",
                        "lawlab"], check=True, capture_output=True)
        yield f"postgresql://lawlab@127.0.0.1:{port}/lawlab"
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(base, ignore_errors=True)
