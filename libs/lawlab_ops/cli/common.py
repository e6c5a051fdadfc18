"""What every verb group shares: the library and state flags, number formatting."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from lawlab import config


def fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)



def with_dirs(p: argparse.ArgumentParser) -> None:
    """--tasks-dir and --data-dir, resolved from the environment or the project."""
    p.add_argument("--tasks-dir", "--tasks", default=str(config.tasks_dir()),
                   help="the task library (env LAWLAB_TASKS_DIR; default var/tasks)")
    p.add_argument("--data-dir", default=str(config.data_dir()),
                   help="durable state and trajectories (env LAWLAB_DATA_DIR; default var/run)")


def split_agent(text: str, model: str = "") -> tuple[str, str]:
    """One name for a model everywhere (issue #52): ``provider/model`` as the reports
    print it (``openai/gpt-4o``; the model may hold slashes of its own), the older
    ``agent:model``, or an agent and a separate ``model``."""
    text = text.strip()
    if model:
        return text, model.strip()
    for sep in (":", "/"):
        if sep in text:
            agent, _, rest = text.partition(sep)
            return agent.strip(), rest.strip()
    return text, ""


class NoStoredData(Exception):
    """A data dir with no agent store: nothing to view."""


@contextlib.contextmanager
def offline_agent(data_dir: str, tasks_dir: str | None = None) -> Iterator[str]:
    """A read-only agent service over a stopped cluster's ``data_dir`` (lawlab_agent.readonly)
    on a free loopback port, for as long as the block runs; yields its address. The
    commands that read results (report, campaign status/trials/list, trial show,
    view) use it when no agent service runs."""
    import json
    import os
    import secrets
    import subprocess
    import sys
    import tempfile
    import time
    from pathlib import Path

    from lawlab.rpc.settings import Settings

    data = Path(data_dir).resolve()
    store_url = Settings.from_env().agent.trial_store_url
    runs = sorted(data.glob("run-*/agent/trials.sqlite"))
    if not store_url and not (data / "agent" / "trials.sqlite").exists() and runs:
        # `lawlab run` keeps each run in a folder of its own under the data dir
        latest = runs[-1].parent.parent
        print(f"[offline] {data} holds {len(runs)} run(s) of `lawlab run`; reading the latest, "
              f"{latest.name} (--data-dir {data}/run-... names another)", file=sys.stderr)
        data = latest
    if not store_url and not (data / "agent" / "trials.sqlite").exists():
        raise NoStoredData(f"no trials stored under {data} (no agent/trials.sqlite): pass "
                           "--data-dir, the data dir of the cluster or campaign that ran them, "
                           "or start the services with `lawlab up`")
    token = os.environ.get("LAWLAB_INTERNAL_TOKEN") or secrets.token_urlsafe(24)
    with tempfile.TemporaryDirectory(prefix="lawlab-view-") as tmp:
        ready, log_path = Path(tmp) / "ready.json", Path(tmp) / "agent.log"
        # the pages trust a browser that opened the URL with this per-run token: only
        # the operator who started the view sees it (issue #50)
        view_token = secrets.token_urlsafe(24)
        env = dict(os.environ, LAWLAB_AGENT_VIEW="1", LAWLAB_INTERNAL_TOKEN=token,
                   LAWLAB_VIEW_TOKEN=view_token, LAWLAB_LOG_LEVEL="WARNING")
        env.pop("LAWLAB_CLI_QUIETED_GRPC", None)
        argv = [sys.executable, "-m", "lawlab_agent", "--host", "127.0.0.1", "--port", "0",
                "--metrics-port", os.environ.get("LAWLAB_VIEW_PORT", "0"),
                "--ready-file", str(ready), "--data-dir", str(data)]
        if tasks_dir:
            argv += ["--tasks-dir", tasks_dir]
        with open(log_path, "w") as log:
            proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    preexec_fn=_die_with_parent)
        try:
            deadline = time.monotonic() + 60
            while not ready.exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text()[-800:]
                    raise NoStoredData(f"the read-only agent service over {data} did not start:"
                                       f" {tail.strip() or 'no output'}")
                time.sleep(0.05)
            info = json.loads(ready.read_text())
            os.environ["LAWLAB_INTERNAL_TOKEN"] = token
            os.environ["LAWLAB_VIEW_HTTP"] = f"http://127.0.0.1:{info['metrics_port']}/"
            os.environ["LAWLAB_VIEW_TOKEN"] = view_token
            yield f"127.0.0.1:{info['port']}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM it when the command that started it dies,
    however it dies (Linux prctl PR_SET_PDEATHSIG)."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def agent_or_offline(args: argparse.Namespace) -> contextlib.AbstractContextManager[str]:
    """The agent service to read results from: ``--agent-addr``; else a running one;
    else (or with ``--offline``) a read-only view of ``--data-dir``, said on stderr."""
    import os
    import sys

    from lawlab.rpc.client import running_service

    data_dir = getattr(args, "data_dir", None) or str(config.data_dir())
    named = getattr(args, "agent_addr", None)
    if named and not getattr(args, "offline", False):
        if running_service("agent", address=named) is not None:
            return contextlib.nullcontext(named)
        # a read falls back to the data dir, saying which address did not answer
        source = ("LAWLAB_AGENT_ADDR" if named == os.environ.get("LAWLAB_AGENT_ADDR")
                  else "--agent-addr")
        print(f"[offline] the agent service at {named} ({source}) does not answer: reading "
              f"{data_dir} offline (read-only; --offline skips the attempt)", file=sys.stderr)
        return offline_agent(data_dir, getattr(args, "tasks_dir", None))
    running = None if getattr(args, "offline", False) else running_service("agent")
    if running:
        return contextlib.nullcontext(running)
    print(f"no agent service running: reading {data_dir} offline (read-only)", file=sys.stderr)
    return offline_agent(data_dir, getattr(args, "tasks_dir", None))


def with_offline(p: argparse.ArgumentParser) -> None:
    """--data-dir and --offline for the commands that read results."""
    if not any("--data-dir" in a.option_strings for a in p._actions):
        p.add_argument("--data-dir", default=str(config.data_dir()),
                       help="with no agent service running, read this stopped cluster's data "
                            "(env LAWLAB_DATA_DIR)")
    p.add_argument("--offline", action="store_true",
                   help="read --data-dir even if an agent service runs")
