"""Stopping a test's cluster and saying why a service did not exit cleanly."""

from __future__ import annotations

import signal

from lawlab.launcher import Cluster


def _meaning(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def stop_cleanly(cluster: Cluster, grace: float = 15.0) -> dict[str, int]:
    """Stop every service; fail naming each one that exited non-zero, with its
    exit meaning and the end of its log (an unclean stop is otherwise only a
    number in a dict the assertion message cuts off)."""
    logs = {name: running.log_path for name, running in cluster.services.items()}
    codes = cluster.stop(grace)
    bad = {name: code for name, code in codes.items() if code != 0}
    if bad:
        parts = [f"unclean shutdown: {codes}"]
        for name, code in bad.items():
            tail = logs[name].read_text(errors="replace").splitlines()[-25:]
            parts.append(f"--- {name}: {_meaning(code)}; last lines of {logs[name]}:\n"
                         + "\n".join(tail))
        raise AssertionError("\n".join(parts))
    return codes
