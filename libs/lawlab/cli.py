"""The ``lawlab`` command: the operator's entry point."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path

import numpy as np

from lawlab import cli_campaign, cli_score, config
from lawlab.cli_sim import (
    add_epoch_parser,
    add_sim_parser,
    add_token_parser,
    cmd_epoch,
    cmd_sim,
    cmd_token,
)
from lawlab.tables import table as _table


def _fmt(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


# ---- tasks ---------------------------------------------------------------------

def cmd_tasks_build(args: argparse.Namespace) -> int:
    from lawlab import log
    from lawlab.taskbuild.build import build_all

    log.setup("taskbuild", "WARNING")
    out = Path(args.out)
    print(f"building the task library into {out} ...", flush=True)
    start = time.perf_counter()
    proposer = None
    if args.llm_base_url:
        from lawlab.taskbuild.llm_variants import openai_proposer

        if not args.llm_model:
            print("lawlab tasks build: --llm-model is required with --llm-base-url", file=sys.stderr)
            return 2
        proposer = openai_proposer(args.llm_base_url, args.llm_model)
    from lawlab import worldkey

    key_path = worldkey.default_path(out)
    try:
        key, created = worldkey.load_or_create(key_path)
    except worldkey.WorldKeyError as err:
        print(f"lawlab tasks build: {err}", file=sys.stderr)
        return 2
    print(f"world key {key.fingerprint} ({'created' if created else 'read'}: {key_path}; keep it "
          "secret, the simulator needs it)", flush=True)
    done = [0]

    def progress(result: dict) -> None:
        done[0] += 1
        world = result.get("hidden_edit", "")
        print(f"  [{done[0]:>2}] {result['task_id']:<32} {world:<40} "
              f"{result.get('seconds', 0):>5.1f} s", flush=True)

    try:
        summary = build_all(out, args.only or None, proposer, key,
                            processes=args.processes, progress=progress)
    except ValueError as err:
        print(f"lawlab tasks build: {err}", file=sys.stderr)
        return 2
    real = [s for s in summary if s.get("type") in ("I", "II")]
    worlds = [s for s in real if s.get("hidden_edit") != "(no world)"]
    print(f"built {len(summary)} tasks ({len(worlds)} of {len(real)} real-data tasks with a "
          f"Parallel world) in {time.perf_counter() - start:.0f} s")
    return 0


def cmd_tasks_validate(args: argparse.Namespace) -> int:
    from lawlab.taskbuild.validate import validate_library

    reports, manifest_problems = validate_library(Path(args.tasks_dir))
    bad = [r for r in reports if not r.ok]
    for r in reports:
        if r.ok:
            print(f"ok    {r.task_id} ({r.checks} checks)")
        else:
            print(f"FAIL  {r.task_id}")
            for p in r.problems:
                print(f"      - {p}")
    for p in manifest_problems:
        print(f"FAIL  MANIFEST: {p}")
    print(f"{len(reports) - len(bad)} of {len(reports)} tasks valid"
          f"{'; MANIFEST matches' if not manifest_problems else '; MANIFEST problems above'}")
    return 0 if not bad and not manifest_problems else 1


def cmd_tasks_audit(args: argparse.Namespace) -> int:
    from lawlab.taskbuild.controls import rubric_audit
    from lawlab.tasks import TaskLibrary

    library = TaskLibrary(Path(args.tasks_dir))
    specs = {}
    if args.specs:
        from lawlab.taskbuild.specs import load_specs

        specs = {s.task_id: s.rubric for s in load_specs()}
    ids = args.only or [t.task_id for t in library if t.meta.suite == "real"]
    unknown = [i for i in ids if i not in library]
    if unknown:
        print(f"lawlab tasks audit: no task {unknown[0]!r} (see lawlab tasks list)", file=sys.stderr)
        return 2
    trouble = 0
    constant_scores = []
    for task_id in ids:
        task = library.get(task_id)
        audits = rubric_audit(task, specs.get(task_id))
        n = len(audits[0].verdicts)
        print(f"{task_id} ({n} items)")
        for audit in audits:
            s_v = audit.passed / n if n else 0.0
            must_pass = "(best)" in audit.law or audit.law == "hidden law"
            bad = must_pass and audit.passed < n
            trouble += bad
            if audit.law == "constant":
                constant_scores.append(s_v)
            print(f"  {'!! ' if bad else '   '}{audit.law:<42} S_V {s_v:.3f}")
            for v in audit.verdicts:
                if args.failures and v.passed:
                    continue
                print(f"        {'pass' if v.passed else 'FAIL'} {v.item_id}: {v.evidence[:160]}")
    if constant_scores:
        print(f"constant control: mean S_V {sum(constant_scores) / len(constant_scores):.3f} over "
              f"{len(constant_scores)} tasks; {trouble} reference or hidden-law rubric failures")
    return 0 if not trouble else 1


def cmd_tasks_show(args: argparse.Namespace) -> int:
    from lawlab.tasks import TaskLibrary

    library = TaskLibrary(Path(args.tasks_dir))
    if args.task_id not in library:
        print(f"lawlab tasks show: no task {args.task_id!r} (see lawlab tasks list)", file=sys.stderr)
        return 2
    task = library.get(args.task_id)
    m = task.meta
    print(f"{m.task_id}: {m.title}\n")
    print(f"discipline {m.discipline}; Type {m.type_label}"
          f"{f' (groups: {m.group_description}, {len(task.group_ids)})' if m.multi_group else ''};"
          f" metric {m.metric}; {len(task.train)} training rows")
    print(f"split: {m.split_kind}: {m.split_rationale}\n")
    print(m.context, "\n")
    rows = [[v.name, v.symbol, v.unit, f"{v.min:.4g}", f"{v.max:.4g}", v.description]
            for v in (m.target, *m.inputs)]
    print(_table(rows, ["variable", "symbol", "unit", "min", "max", "description"]))
    c = m.caps
    print(f"\ncaps: max_law_constants {c.max_law_constants}, max_local_params "
          f"{c.max_local_params}, fit_timeout_seconds {c.fit_timeout_seconds:g}, max_turns "
          f"{c.max_turns}"
          + (f"; Parallel: max_experiment_calls {c.max_experiment_calls}, max_points_per_call "
             f"{c.max_points_per_call}, samples per point {c.min_samples_per_point}-"
             f"{c.max_samples_per_point}" if task.has_world() else "; no Parallel world"))
    print(f"rubric: {len(task.rubric())} validity items (lawlab tasks audit --only {m.task_id})")
    print(f"\nsource: {m.source}\nlicence: {m.license}")
    if args.answer_key:
        print("\n-- answer key (operators only) --")
        metrics_ = json.loads((task.root / "eval" / "reference_metrics.json").read_text())
        for r in task.references():
            held = metrics_["references"][r.name]["heldout_metric"]
            mark = " (best)" if r.name == metrics_["best_reference"] else ""
            print(f"reference {r.name}{mark}: {r.expr}   held-out {m.metric} {held:.4g}")
            print(f"    {r.citation}")
        print(f"naive baseline: {metrics_['naive_baseline']:.4g}")
        for item in task.rubric():
            print(f"rubric {item['id']}: {item.get('description', '')}")
        if task.has_world():
            law = task.hidden_law()
            print(f"hidden law: {law.expr}\n    {law.rationale}")
    return 0


def cmd_tasks_fingerprint(args: argparse.Namespace) -> int:
    """The public fingerprint of a world key (never the key itself)."""
    from lawlab import worldkey

    path = Path(args.key) if args.key else worldkey.default_path(Path(args.tasks_dir))
    try:
        key = worldkey.load(path)
    except worldkey.WorldKeyError as err:
        print(f"lawlab tasks fingerprint: {err}", file=sys.stderr)
        return 2
    print(key.fingerprint)
    return 0


def cmd_tasks_catalogue(args: argparse.Namespace) -> int:
    from lawlab.taskbuild.catalogue import catalogue

    text = catalogue(Path(args.tasks_dir))
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text, end="")
    return 0


def cmd_tasks_import(args: argparse.Namespace) -> int:
    from lawlab.taskbuild.importer import import_all

    reports = import_all(Path(args.source), Path(args.out))
    for r in reports:
        print(f"{'ok  ' if r.ok else 'FAIL'}  {r.task_id}")
        for line in r.converted:
            print(f"      converted: {line}")
        for line in r.unconvertible:
            print(f"      NOT converted: {line}")
        for line in r.problems:
            print(f"      validation: {line}")
    good = sum(r.ok for r in reports)
    print(f"imported {good} of {len(reports)} tasks into {args.out}")
    return 0 if reports and good == len(reports) else 1


def cmd_tasks_list(args: argparse.Namespace) -> int:
    from lawlab.tasks import TaskLibrary

    library = TaskLibrary(Path(args.tasks_dir))
    rows = [[t.task_id, t.meta.type_label, t.meta.discipline, t.meta.metric, len(t.train),
             len(t.group_ids) or "-", ", ".join(t.meta.input_names)] for t in library]
    print(_table(rows, ["task", "type", "discipline", "metric", "train rows", "groups", "inputs"]))
    return 0


# ---- services --------------------------------------------------------------------

def cmd_serve(args: argparse.Namespace, rest: list[str]) -> int:
    from lawlab.rpc.main import service_main

    service_main(args.service, rest)
    return 0


def _busy_ports() -> list[str]:
    """The default ports already bound on loopback (another `lawlab up`, most likely)."""
    import socket

    busy = []
    for name in config.SERVICES:
        for port in (config.grpc_port(name), config.metrics_port(name)):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.settimeout(0.2)
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    busy.append(f"{name} {port}")
    return busy


def cmd_up(args: argparse.Namespace) -> int:
    from lawlab.launcher import Cluster

    if not args.ephemeral:
        busy = _busy_ports()
        if busy:  # checked before anything is written: a running cluster keeps its token
            print(f"lawlab up: the default ports are in use ({', '.join(busy[:4])}"
                  f"{', ...' if len(busy) > 4 else ''}): is `lawlab up` already running? Use it "
                  "(lawlab commands find it on these ports), stop it first, or start another "
                  "one on free ports with `lawlab up --ephemeral --data-dir OTHER`",
                  file=sys.stderr)
            return 1
    data_dir = Path(args.data_dir).resolve()
    cluster = Cluster(Path(args.tasks_dir).resolve(), data_dir, log_dir=data_dir / "logs")
    print(f"starting {', '.join(config.SERVICES)} (10-30 s; logs in {cluster.log_dir}) ...",
          file=sys.stderr, flush=True)
    stop = {"now": False}

    def handler(signum: int, frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    try:
        cluster.start(default_ports=not args.ephemeral, progress=sys.stderr)
        rows = [[n, r.address, f"127.0.0.1:{r.metrics_port}", r.process.pid]
                for n, r in cluster.services.items()]
        print(_table(rows, ["service", "grpc", "metrics", "pid"]))
        print(f"status page: http://127.0.0.1:{cluster.services['agent'].metrics_port}/")
        print(f"internal token in {cluster.data_dir / 'internal-token'} (lawlab commands in "
              "another terminal read it from there when run with the same --data-dir or "
              "LAWLAB_DATA_DIR, or export LAWLAB_INTERNAL_TOKEN)")
        print(f"logs in {cluster.log_dir}; Ctrl-C or SIGTERM stops all services", flush=True)
        while not stop["now"]:
            for name, r in cluster.services.items():
                if r.process.poll() is not None:
                    print(f"{name} exited with {r.process.returncode}; stopping", file=sys.stderr)
                    stop["now"] = True
            time.sleep(0.2)
    finally:
        codes = cluster.stop()
        print("stopped: " + ", ".join(f"{n}={c}" for n, c in codes.items()))
    return 0


# ---- trials ------------------------------------------------------------------------

async def _run_trial(address: str, task: str, setting: str, agent: str, model: str, seed: int,
                     token: str | None = None, context: str = "",
                     decoding: dict | None = None):
    from lawlab import convert
    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.rpc.client import TRIAL_CALL, aio_channel

    async with aio_channel(address, token=token) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        request = agent_pb2.RunTrialRequest(
            task_id=task, setting=convert.setting_from_name(setting), agent=agent, model=model,
            seed=seed, context=context)
        if decoding:
            request.decoding.CopyFrom(agent_pb2.Decoding(**decoding))
        return await stub.RunTrial(request, timeout=TRIAL_CALL)


def _trial_rows(trials: list) -> list[list[str]]:
    from lawlab import convert
    from lawlab.agent.v1 import agent_pb2

    rows = []
    for t in trials:
        s = t.scores
        rows.append([
            t.task_id, convert.setting_name(t.setting),
            agent_pb2.TrialStatus.Name(t.status).removeprefix("TRIAL_STATUS_").lower(),
            t.turns,
            _fmt(s.s_n if s.HasField("s_n") else None),
            _fmt(s.s_v if s.HasField("s_v") else None),
            _fmt(s.s_s if s.HasField("s_s") else None),
            f"{t.wall_seconds:.1f}s",
        ])
    return rows


TRIAL_HEADER = ["task", "setting", "status", "turns", "S_N", "S_V", "S_S", "wall"]


def cmd_trial_run(args: argparse.Namespace) -> int:
    decoding = None
    if args.decoding:
        try:
            decoding = json.loads(args.decoding)
        except json.JSONDecodeError as err:
            print(f"lawlab trial run: --decoding is not JSON ({err.msg})", file=sys.stderr)
            return 2
    started = time.monotonic()
    print(f"[running {args.agent}{'/' + args.model if args.model else ''} on {args.task} "
          f"({args.setting}) through {args.agent_addr}; a trial takes seconds to minutes]",
          file=sys.stderr)
    trial = asyncio.run(_run_trial(args.agent_addr, args.task, args.setting, args.agent,
                                   args.model, args.seed, context=args.context,
                                   decoding=decoding))
    if time.monotonic() - started < 0.5 * max(trial.wall_seconds, 1.0):
        print(f"[stored result: this trial ran earlier ({trial.wall_seconds:.1f} s); trials are "
              "idempotent by id]", file=sys.stderr)
    if args.json:
        from google.protobuf.json_format import MessageToDict

        doc = MessageToDict(trial, preserving_proto_field_name=True)
        doc["seed"] = int(doc.get("seed", 0))
        print(json.dumps(doc, indent=2))
    else:
        print(_table(_trial_rows([trial]), TRIAL_HEADER))
        print(f"trajectory: {trial.trajectory_path}")
        if trial.error:
            print(f"error: {trial.error}")
    return 0 if not trial.error else 1


def cmd_run(args: argparse.Namespace) -> int:
    """The main job on the embedded default: all services, one Real and one Parallel trial."""
    from lawlab.launcher import Cluster
    from lawlab.tasks import TaskLibrary

    library = TaskLibrary(Path(args.tasks_dir))
    parallel_task = args.parallel_task
    if parallel_task in library and not library.get(parallel_task).has_world():
        # worlds depend on the operator's world key: this library's key drew none here
        fallback = next((t.task_id for t in library if t.has_world()
                         and not t.meta.multi_group), None)
        if fallback is None:
            print("lawlab run: no task of this library has a Parallel world", file=sys.stderr)
            return 1
        print(f"[{parallel_task} has no Parallel world under this library's world key; "
              f"using {fallback}]", flush=True)
        parallel_task = fallback
    # each run keeps its own state and trajectories: nothing from an earlier run is lost
    data_dir = Path(args.data_dir).resolve() / time.strftime("run-%Y%m%d-%H%M%S")
    cluster = Cluster(Path(args.tasks_dir).resolve(), data_dir, log_dir=data_dir / "logs")
    print("starting the five services on loopback ...", flush=True)
    trials = []
    try:
        cluster.start(default_ports=args.default_ports, progress=sys.stdout)
        for name, r in cluster.services.items():
            print(f"  {name:<10} grpc {r.address}  metrics 127.0.0.1:{r.metrics_port}")
        print(f"  status page: http://127.0.0.1:{cluster.services['agent'].metrics_port}/")
        plan = [(args.real_task, "real"), (parallel_task, "parallel")]
        for i, (task, setting) in enumerate(plan, 1):
            print(f"[{i}/{len(plan)}] {setting} trial on {task} with the {args.agent} agent ...",
                  flush=True)
            trial = asyncio.run(_run_trial(cluster.address("agent"), task, setting, args.agent,
                                           "", args.seed, token=cluster.internal_token))
            trials.append(trial)
            if trial.error:
                print(f"  error: {trial.error}")
    finally:
        codes = cluster.stop()
    print()
    print(_table(_trial_rows(trials), TRIAL_HEADER))
    print()
    for t in trials:
        print(f"trajectory ({t.task_id}, {'real' if t.setting == 1 else 'parallel'}): "
              f"{t.trajectory_path}")
        if t.score_notes:
            print(f"  {t.score_notes}")
    print(f"service logs: {cluster.log_dir}")
    clean = all(c == 0 for c in codes.values())
    print("services stopped cleanly" if clean else f"service exit codes: {codes}")
    failed = [t for t in trials if t.error]
    return 0 if clean and not failed and len(trials) == 2 else 1


def cmd_fit(args: argparse.Namespace) -> int:
    """Nonlinear least squares of an expression to CSV columns (the world builder's engine)."""
    import pandas as pd

    from lawlab.expr import Expression, ExpressionError
    from lawlab.fitting import FitError, fit_expression

    try:
        expr = Expression(args.expr)
    except ExpressionError as err:
        print(f"error: --expr: {err}", file=sys.stderr)
        return 2
    try:
        frame = pd.read_csv(args.data)
    except (OSError, ValueError) as err:
        print(f"error: --data: cannot read {args.data}: {err}", file=sys.stderr)
        return 2
    if args.target not in frame.columns:
        print(f"error: --target: no column {args.target!r} in {args.data}; columns are "
              f"{list(frame.columns)}", file=sys.stderr)
        return 2
    if args.inputs:
        inputs = [n.strip() for n in args.inputs.split(",") if n.strip()]
        missing = [n for n in inputs if n not in frame.columns]
        unused = [n for n in inputs if n not in expr.names]
        if missing or unused:
            print(f"error: --inputs: {missing or unused} "
                  f"{'are not columns of ' + args.data if missing else 'do not appear in --expr'}"
                  f"; columns are {list(frame.columns)}", file=sys.stderr)
            return 2
    else:
        inputs = sorted(n for n in expr.names if n in frame.columns and n != args.target)
    constants = sorted(expr.names - set(inputs))
    if args.target in expr.names:
        print(f"error: --expr uses the target column {args.target!r}", file=sys.stderr)
        return 2
    if not inputs:
        print(f"error: --expr uses no column of {args.data} (columns {list(frame.columns)}); "
              "the names that are columns are the inputs, the others are fitted", file=sys.stderr)
        return 2
    import difflib

    lookalikes = {c: difflib.get_close_matches(c, [str(x) for x in frame.columns], n=1, cutoff=0.75)
                  for c in constants}
    lookalikes = {c: m[0] for c, m in lookalikes.items() if m and m[0] != args.target}
    if lookalikes and not args.inputs:
        pairs = ", ".join(f"{c!r} (column {m!r}?)" for c, m in lookalikes.items())
        print(f"error: {pairs} would be fitted as constants but look like misspelt columns; "
              "fix the names, or say which names are inputs with --inputs", file=sys.stderr)
        return 2
    init: dict[str, float] = {}
    for item in filter(None, (args.init or "").split(",")):
        name, _, value = item.partition("=")
        if name.strip() not in constants:
            print(f"error: --init: {name.strip()!r} is not a constant of the expression "
                  f"(constants: {constants})", file=sys.stderr)
            return 2
        try:
            init[name.strip()] = float(value)
        except ValueError:
            print(f"error: --init: {item!r} is not name=number", file=sys.stderr)
            return 2
    data, texts = {}, {}
    for name in [*inputs, args.target]:
        numeric = pd.to_numeric(frame[name], errors="coerce").to_numpy(float)
        texts[name] = int((frame[name].notna() & np.isnan(numeric)).sum())
        data[name] = numeric
    y = data.pop(args.target)
    all_text = [n for n in [*inputs, args.target] if texts[n] == len(frame) and len(frame)]
    if all_text:
        print(f"error: column(s) {all_text} of {args.data} hold no numbers", file=sys.stderr)
        return 2
    keep = np.all([np.isfinite(v) for v in [*data.values(), y]], axis=0)
    dropped = int((~keep).sum())
    if int(keep.sum()) <= len(constants):
        print(f"error: {int(keep.sum())} usable rows for {len(constants)} constants in "
              f"{args.data}" + (f" ({dropped} rows dropped: missing or non-numeric values)"
                                if dropped else ""), file=sys.stderr)
        return 2
    if dropped:
        detail = ", ".join(f"{n}: {k} non-numeric" for n, k in texts.items() if k)
        print(f"[dropped {dropped} of {len(frame)} rows with missing or non-numeric values"
              + (f" ({detail})" if detail else "") + "]", file=sys.stderr)
    try:
        result = fit_expression(expr, {k: v[keep] for k, v in data.items()}, y[keep], constants,
                                init, space=args.space, n_starts=args.starts)
    except FitError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    stderrs = [result.stderr.get(n, float("nan")) for n in constants]
    failed = (not result.success or not np.isfinite(result.r2) or result.r2 < 0
              or not all(np.isfinite(s) and s > 0 for s in stderrs))
    if args.json:
        print(json.dumps({"expr": expr.text, "inputs": inputs, **result.as_dict(),
                          "rows_used": int(keep.sum()), "converged": not failed}, indent=2,
                         default=float))
        return 1 if failed else 0
    if failed:
        print(f"error: the fit did not converge to a usable result (R^2 {result.r2:.4g}, "
              f"{result.message or 'standard errors undefined'}); give starting values with "
              f"--init (e.g. --init {','.join(f'{c}=1' for c in constants[:2])}), more --starts, "
              "or check the expression against the data", file=sys.stderr)
        return 1
    print(f"{expr.text}   ({int(keep.sum())} rows; inputs {', '.join(inputs)}; "
          f"{args.space} residuals)")
    rows = [[n, f"{result.constants[n]:.6g}", f"{result.stderr[n]:.3g}"] for n in constants]
    print(_table(rows, ["constant", "value", "std error"]))
    print(f"RSS {result.rss:.6g}   R^2 {result.r2:.6f}")
    return 0


def cmd_sandbox_exec(args: argparse.Namespace) -> int:
    """Run a file in a fresh session of a running sandbox service."""
    import pandas as pd

    from lawlab import convert
    from lawlab.rpc.client import EXECUTE_CALL, FAST_CALL, sync_channel
    from lawlab.sandbox.v1 import sandbox_pb2, sandbox_pb2_grpc
    from lawlab.tasks import GROUP_COL

    code = Path(args.file).read_text()
    if args.data:
        frame = pd.read_csv(args.data, dtype={GROUP_COL: str})
    else:
        frame = pd.DataFrame({"y": pd.Series(dtype=float), "x": pd.Series(dtype=float)})
    numeric = [c for c in frame.columns if c != GROUP_COL]
    if len(numeric) < 2:
        print("error: --data needs a target column and at least one input column", file=sys.stderr)
        return 2
    channel = sync_channel(args.sandbox_addr)
    stub = sandbox_pb2_grpc.SandboxServiceStub(channel)
    session = stub.CreateSession(sandbox_pb2.CreateSessionRequest(
        data=convert.frame_to_table(frame), target_col=numeric[0], input_cols=numeric[1:],
        multi_group=GROUP_COL in frame.columns), timeout=FAST_CALL)
    try:
        start = time.perf_counter()
        resp = stub.Execute(sandbox_pb2.ExecuteRequest(
            session_id=session.session_id, code=code, timeout_seconds=args.timeout),
            timeout=EXECUTE_CALL)
        round_trip = time.perf_counter() - start
    finally:
        stub.CloseSession(sandbox_pb2.CloseSessionRequest(session_id=session.session_id),
                          timeout=FAST_CALL)
    status = sandbox_pb2.ExecStatus.Name(resp.status).removeprefix("EXEC_STATUS_").lower()
    if args.json:
        print(json.dumps({"status": status, "stdout": resp.stdout, "stderr": resp.stderr,
                          "truncated": resp.truncated, "exit_code": resp.exit_code,
                          "box_seconds": resp.wall_seconds, "round_trip_seconds": round_trip}))
    else:
        sys.stdout.write(resp.stdout)
        sys.stderr.write(resp.stderr)
        print(f"[status {status}, exit {resp.exit_code}, box {resp.wall_seconds * 1000:.0f} ms, "
              f"round trip {round_trip * 1000:.0f} ms{', output truncated' if resp.truncated else ''}]",
              file=sys.stderr)
    return 0 if status == "ok" else 1


def build_parser() -> argparse.ArgumentParser:
    """Every verb and flag of the command line (README.md's list is checked against it)."""
    parser = argparse.ArgumentParser(prog="lawlab", description=__doc__)
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of a failed call instead of one line")
    sub = parser.add_subparsers(dest="command", required=True)

    def with_dirs(p: argparse.ArgumentParser) -> None:
        p.add_argument("--tasks-dir", "--tasks", default=str(config.tasks_dir()),
                       help="the task library (env LAWLAB_TASKS_DIR; default var/tasks)")
        p.add_argument("--data-dir", default=str(config.data_dir()),
                       help="durable state and trajectories (env LAWLAB_DATA_DIR; default var/run)")

    p = sub.add_parser("serve", help="start one service")
    p.add_argument("service", choices=config.SERVICES)

    p = sub.add_parser("up", help="start all five services in the foreground")
    with_dirs(p)
    p.add_argument("--ephemeral", action="store_true", help="free ports instead of the defaults")

    p = sub.add_parser("run", help="the main job: all services, one Real and one Parallel trial")
    with_dirs(p)
    p.add_argument("--agent", default="template")
    p.add_argument("--real-task", default="dnase_elisa")
    p.add_argument("--parallel-task", default="mercury_vapour_pressure")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--default-ports", action="store_true",
                   help="bind the documented default ports instead of free ones")

    tasks = sub.add_parser("tasks", help="the task library").add_subparsers(dest="verb", required=True)
    p = tasks.add_parser("list")
    with_dirs(p)
    p = tasks.add_parser("validate", help="check every task's files and claims")
    with_dirs(p)
    p = tasks.add_parser("audit", help="every rubric item for the references, the hidden law and "
                                       "a constant (what S_V can tell apart)")
    with_dirs(p)
    p.add_argument("--only", nargs="*", help="task ids (default: every real-data task)")
    p.add_argument("--specs", action="store_true",
                   help="judge the rubrics of the task specifications in the source tree "
                        "(taskbuild/tasks/*.yaml) instead of the built ones")
    p.add_argument("--failures", action="store_true", help="print only the failing verdicts")
    p = tasks.add_parser("show", help="one task's metadata (--answer-key: references, law)")
    with_dirs(p)
    p.add_argument("task_id")
    p.add_argument("--answer-key", action="store_true")
    p = tasks.add_parser("fingerprint", help="the public fingerprint of the world key (the suite)")
    with_dirs(p)
    p.add_argument("--key", help="a world key file (default: LAWLAB_WORLD_KEY_FILE, or world-key "
                                 "beside the task library)")
    p = tasks.add_parser("catalogue", help="the Markdown catalogue of the library (docs/tasks.md)")
    with_dirs(p)
    p.add_argument("--out")
    p = tasks.add_parser("import", help="convert official SciLaws-Bench task folders")
    p.add_argument("source", help="a task folder or a folder of task folders")
    p.add_argument("--out", default="var/imported", help="where converted tasks go")
    p = tasks.add_parser("build", help="build the task library (data, references, rubrics, "
                                       "Parallel worlds under the world key)")
    p.add_argument("--out", default=str(config.tasks_dir()))
    p.add_argument("--only", nargs="*")
    p.add_argument("--processes", type=int, default=None,
                   help="tasks built at once (default: the cores)")
    p.add_argument("--llm-base-url", help="optional: an OpenAI-compatible endpoint that proposes "
                                          "hidden-law variants into the same screen")
    p.add_argument("--llm-model", help="model name for --llm-base-url (key: LAWLAB_LLM_API_KEY)")

    trial = sub.add_parser("trial", help="trials").add_subparsers(dest="verb", required=True)
    p = trial.add_parser("run", help="run one trial through a running agent service")
    p.add_argument("--task", required=True)
    p.add_argument("--setting", choices=["real", "parallel"], required=True)
    p.add_argument("--agent", default="template")
    p.add_argument("--model", default="")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--context", default="", choices=["", "full", "no_var_detail",
                                                     "anonymous_names", "numeric_only"],
                   help="what the solver sees (docs/agents.md: context ablations)")
    p.add_argument("--decoding", help="LLM decoding overrides as JSON (docs/agents.md)")
    p.add_argument("--agent-addr", default=config.service_address("agent"))
    p.add_argument("--json", action="store_true")

    p = trial.add_parser("show", help="a trajectory rendered for reading: turns, tool calls, "
                                      "outputs, usage, the submission and its scores")
    p.add_argument("trial", help="a trial id (from a running agent service) or a trajectory "
                                 ".jsonl file")
    p.add_argument("--attempt", type=int, default=0, help="which attempt (default: the last)")
    p.add_argument("--prompts", action="store_true", help="also print the prompts")
    p.add_argument("--full", action="store_true", help="do not shorten long replies and outputs")
    p.add_argument("--agent-addr", default=config.service_address("agent"))

    p = sub.add_parser("fit", help="fit an expression's constants to CSV data")
    p.add_argument("--expr", required=True, help='e.g. "b1*(1-exp(-b2*x))"')
    p.add_argument("--data", required=True, help="CSV with the inputs and the target")
    p.add_argument("--target", required=True)
    p.add_argument("--init", help="starting values, e.g. b1=500,b2=1e-4")
    p.add_argument("--inputs", help="the input columns, comma separated (default: the names of "
                                    "the expression that are CSV columns)")
    p.add_argument("--space", choices=["linear", "log10"], default="linear",
                   help="residual space (log10 for multi-decade positive targets)")
    p.add_argument("--starts", type=int, default=24, help="multi-start count")
    p.add_argument("--json", action="store_true")

    sandbox = sub.add_parser("sandbox", help="the sandbox").add_subparsers(dest="verb", required=True)
    p = sandbox.add_parser("exec", help="run a file in a fresh session of a running sandbox")
    p.add_argument("--file", required=True)
    p.add_argument("--data", help="CSV: target column first, then inputs (+ group_id)")
    p.add_argument("--timeout", type=float, default=100.0, help="seconds (at most 100)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--sandbox-addr", default=config.service_address("sandbox"))

    add_sim_parser(sub)
    add_token_parser(sub)
    add_epoch_parser(sub)
    from lawlab.cli_leaderboard import add_leaderboard_parser

    add_leaderboard_parser(sub)
    cli_score.add_parsers(sub)
    cli_campaign.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    try:
        return _dispatch(parser, args, rest)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001  (gRPC errors become one line with a hint)
        import grpc

        if not isinstance(err, grpc.RpcError) or args.debug:
            raise
        print(rpc_error_line(args, err), file=sys.stderr)
        return 1


RPC_HINTS = {
    "UNAVAILABLE": "is the service running? start them with `lawlab up` in another terminal, "
                   "or pass its address (--agent-addr, --addr, or LAWLAB_<SERVICE>_ADDR)",
    "UNAUTHENTICATED": "the service wants a token: lawlab's own services share "
                       "LAWLAB_INTERNAL_TOKEN (`lawlab up` writes it to <data dir>/internal-token); "
                       "external teams use LAWLAB_TOKEN",
    "DEADLINE_EXCEEDED": "the call took too long; the service may be overloaded (retrying is "
                         "safe: calls are idempotent by id)",
}


# external teams reach only the simulator, with their own token
SIM_HINTS = {
    "UNAVAILABLE": "is the simulator reachable? pass its address with --addr or "
                   "LAWLAB_SIMULATOR_ADDR (the one the operator gave you; with TLS also --ca)",
    "UNAUTHENTICATED": "pass your team's token with --token or LAWLAB_TOKEN (operators: "
                       "`lawlab token create --team NAME`)",
    "NOT_FOUND": "`lawlab sim tasks` lists the tasks, `lawlab sim sessions` your sessions",
}


def rpc_error_line(args: argparse.Namespace, err) -> str:
    """One line for a failed call: the command, the status, the service's message and
    what to do; never a traceback."""
    code = err.code().name if hasattr(err, "code") and err.code() else "UNKNOWN"
    details = (err.details() if hasattr(err, "details") else "") or ""
    if code == "UNAVAILABLE" and ("Connection refused" in details or "failed to connect" in details
                                  or "connect" in details.lower()):
        details = details.splitlines()[0][:200]
    what = " ".join(str(getattr(args, k)) for k in ("command", "verb", "kind")
                    if getattr(args, k, None))
    hint = (SIM_HINTS.get(code) if args.command == "sim" else None) or RPC_HINTS.get(code, "")
    return f"lawlab {what}: {code}: {details}" + (f"\n  hint: {hint}" if hint else "")


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace, rest: list[str]) -> int:
    if args.command == "serve":
        return cmd_serve(args, rest)
    if rest:
        parser.error(f"unrecognised arguments: {' '.join(rest)}")
    if args.command == "up":
        return cmd_up(args)
    if args.command == "run":
        return cmd_run(args)
    if args.command == "tasks":
        return {"list": cmd_tasks_list, "build": cmd_tasks_build, "validate": cmd_tasks_validate,
                "show": cmd_tasks_show, "catalogue": cmd_tasks_catalogue,
                "fingerprint": cmd_tasks_fingerprint, "audit": cmd_tasks_audit,
                "import": cmd_tasks_import}[args.verb](args)
    if args.command == "trial":
        if args.verb == "show":
            from lawlab.cli_trial import cmd_trial_show

            return cmd_trial_show(args)
        return cmd_trial_run(args)
    if args.command == "sandbox":
        return cmd_sandbox_exec(args)
    if args.command == "fit":
        return cmd_fit(args)
    if args.command == "sim":
        return cmd_sim(args)
    if args.command == "campaign":
        return cli_campaign.cmd_campaign(args)
    if args.command == "report":
        return cli_campaign.cmd_report(args)
    if args.command == "audit":
        return cli_campaign.cmd_audit_memorization(args)
    if args.command == "score":
        return cli_score.cmd_score(args)
    if args.command == "judge":
        return cli_score.cmd_judge(args)
    if args.command == "token":
        return cmd_token(args)
    if args.command == "epoch":
        return cmd_epoch(args)
    if args.command == "leaderboard":
        from lawlab.cli_leaderboard import cmd_leaderboard

        return cmd_leaderboard(args)
    parser.error("unknown command")
    return 2


if __name__ == "__main__":
    sys.exit(main())
