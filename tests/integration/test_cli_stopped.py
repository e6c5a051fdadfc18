"""Every verb that talks to a service, run as a new user would with nothing running
(from another directory, every address pointing at a closed loopback port): one
line naming the problem plus a hint, a non-zero exit, never a traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

LAWLAB = str(Path(sys.executable).parent / "lawlab")
SERVICES = ("agent", "simulator", "sandbox", "scorer", "judge")


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


VERBS = [
    ["trial", "run", "--task", "dnase_elisa", "--setting", "real", "--agent", "template"],
    ["trial", "show", "no-such-trial"],
    ["campaign", "list"], ["campaign", "status", "c"], ["campaign", "trials", "c"],
    ["campaign", "cancel", "c"], ["campaign", "audit", "c"],
    ["campaign", "run", "--agent-addr", "ADDR", "--agents", "template", "--tasks", "dnase_elisa"],
    ["campaign", "run", "--detach", "--agents", "template"],
    ["report", "c"],
    ["sim", "tasks"], ["sim", "show", "dnase_elisa"], ["sim", "open", "dnase_elisa"],
    ["sim", "status", "s"], ["sim", "query", "s", "--input", "x=1"], ["sim", "close", "s"],
    ["sim", "sessions"], ["sim", "submissions"], ["sim", "submission", "x"],
    ["sandbox", "exec", "--file", "LAW"],
    ["score", "--task", "dnase_elisa", "--submission", "LAW", "--scorer-addr", "ADDR"],
    ["judge", "validity", "--task", "dnase_elisa", "--submission", "LAW", "--judge-addr", "ADDR"],
    ["judge", "structure", "--task", "dnase_elisa", "--submission", "LAW", "--judge-addr",
     "ADDR"],
]


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    home = tmp_path_factory.mktemp("elsewhere")  # not the checkout: paths must still resolve
    addr = f"127.0.0.1:{_closed_port()}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAWLAB_")}
    env.update({f"LAWLAB_{s.upper()}_ADDR": addr for s in SERVICES})
    env["LAWLAB_DATA_DIR"] = str(home / "run")
    (home / "law.py").write_text("x = 1\n")
    return home, addr, env


@pytest.mark.parametrize("verb", VERBS, ids=[" ".join(v[:2]) for v in VERBS])
def test_a_verb_against_stopped_services_says_one_line_and_what_to_do(stopped, verb):
    home, addr, env = stopped
    argv = [a.replace("ADDR", addr).replace("LAW", str(home / "law.py")) for a in verb]
    out = subprocess.run([LAWLAB, *argv], cwd=home, env=env, capture_output=True, text=True,
                         timeout=120)
    err = out.stderr.strip().splitlines()
    assert out.returncode != 0, out
    assert "Traceback" not in out.stderr, out.stderr
    # the message line (progress notes in brackets aside) and at most one hint line
    said = [line for line in err if not line.startswith("[")]
    assert 1 <= len(said) <= 2, out.stderr
    assert said[0].startswith(f"lawlab {verb[0]}"), said
    text = out.stderr
    assert "lawlab up" in text or "LAWLAB_SIMULATOR_ADDR" in text, text


def test_debug_shows_the_traceback(stopped):
    home, addr, env = stopped
    out = subprocess.run([LAWLAB, "--debug", "campaign", "list"], cwd=home, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "Traceback" in out.stderr
