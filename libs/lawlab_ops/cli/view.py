"""``lawlab view``: open past campaigns and trials in a browser with no service
running: the status page, every trial with filters, each transcript turn by turn
with the judges' evidence, served read-only from a data dir (lawlab_agent.readonly).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from lawlab import config


def cmd_view(args: argparse.Namespace) -> int:
    if args.port is not None:
        os.environ["LAWLAB_VIEW_PORT"] = str(args.port)
    if args.prices:  # the pages' costs (lawlab.results.prices); the view's service reads it
        os.environ["LAWLAB_PRICES"] = str(Path(args.prices).resolve())
    # a SIGTERM (kill, a supervisor) stops the view as Ctrl-C does
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    if args.file:  # an export (`lawlab export`): loaded into a data dir of its own
        import tempfile

        from lawlab_ops.cli.results import load_export, release_note

        # its own SQLite store, whatever store LAWLAB_TRIAL_STORE_URL names
        os.environ.pop("LAWLAB_TRIAL_STORE_URL", None)
        with tempfile.TemporaryDirectory(prefix="lawlab-export-") as tmp:
            loaded = load_export(Path(args.file), Path(tmp))
            note = release_note(Path(args.file), loaded.get("release", ""),
                                Path(args.tasks_dir))
            if note:
                print(note, file=sys.stderr)
            print(f"[export] campaign {loaded['campaign_id']} from {args.file}: "
                  f"{loaded['trials']} trials, {loaded['transcripts']} transcripts "
                  "(`lawlab import` keeps it in a data dir)", file=sys.stderr)
            return _serve(tmp, args)
    return _serve(args.data_dir, args)


def _serve(data_dir: str, args: argparse.Namespace) -> int:
    from lawlab_ops.cli.common import offline_agent

    with offline_agent(data_dir, args.tasks_dir):
        url = os.environ["LAWLAB_VIEW_HTTP"]
        # any local user can reach the loopback port: hidden structure (Parallel laws and
        # S_S, the structure judge's evidence) only to a browser that opened this URL
        opening = f"{url}?token={os.environ['LAWLAB_VIEW_TOKEN']}"
        print(f"lawlab view: {opening} (read-only over {args.file or data_dir}; every trial at "
              f"{url}trials; without the token in this URL the pages withhold Parallel "
              "laws, S_S and the structure judge's evidence); Ctrl-C stops", flush=True)
        if args.open:
            import webbrowser

            webbrowser.open(opening)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("stopped", file=sys.stderr)
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("view", help="open past campaigns and trials in a browser, no service "
                                    "running (read-only over a data dir, or an export)")
    p.add_argument("file", nargs="?", help="an export (`lawlab export`) to open instead of a "
                                           "data dir; nothing is written outside a temporary "
                                           "folder")
    p.add_argument("--data-dir", default=str(config.data_dir()),
                   help="the data dir of the cluster or campaign (env LAWLAB_DATA_DIR; an "
                        "embedded `campaign run` prints its own)")
    p.add_argument("--tasks-dir", default=str(config.tasks_dir()))
    p.add_argument("--port", type=int, help="HTTP port of the pages (default: a free one)")
    p.add_argument("--open", action="store_true", help="open it in the default browser")
    p.add_argument("--prices", help="a price list (YAML: provider/model: {prompt: USD per 1M "
                                    "tokens, completion: ...}; env LAWLAB_PRICES): costs "
                                    "beside the tokens")
    p.set_defaults(func=cmd_view)
