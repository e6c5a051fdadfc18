"""Stopping a test's cluster and saying why a service did not exit cleanly."""

from __future__ import annotations

import signal

from lawlab_ops.launcher import Cluster


def _meaning(code: int) -> str:
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def stop_report(cluster: Cluster, grace: float = 15.0) -> str:
    """Stop every service; "" when each exited 0, otherwise the exit codes and,
    for each service that did not, what its code means and the end of its log
    (an unclean stop is otherwise only a number in a dict the assertion message
    cuts off). Call it in a ``finally`` and assert on it after, so that a test's
    own failure stays the headline."""
    logs = {name: running.log_path for name, running in cluster.services.items()}
    codes = cluster.stop(grace)
    bad = {name: code for name, code in codes.items() if code != 0}
    if not bad:
        return ""
    parts = [f"unclean shutdown: {codes}"]
    for name, code in bad.items():
        try:
            tail = "\n".join(logs[name].read_text(errors="replace").splitlines()[-25:])
        except OSError as err:
            tail = f"(log unavailable: {err})"
        parts.append(f"--- {name}: {_meaning(code)}; last lines of {logs[name]}:\n{tail}")
    return "\n".join(parts)


def stop_cleanly(cluster: Cluster, grace: float = 15.0) -> None:
    """Stop every service and fail with :func:`stop_report`'s account if one did
    not exit 0."""
    report = stop_report(cluster, grace)
    assert not report, report
