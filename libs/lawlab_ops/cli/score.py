"""``lawlab score`` and ``lawlab judge``: score one submission file from the shell.

The code paths are the services' own: a submission is untrusted code, so it is
executed only by the sandbox, through the scorer or the judge. With
``--scorer-addr``/``--judge-addr``, or when `lawlab up` runs (LAWLAB_SCORER_ADDR,
LAWLAB_JUDGE_ADDR or the default ports answer their health check), the verbs use
the running services; otherwise they start the services they need on free
loopback ports (sandbox plus scorer or judge) and stop them afterwards.
``lawlab judge structure --law ... --base ...`` compares expressions with a
submission by static translation only (nothing is executed), so it runs
in-process.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf.json_format import MessageToDict

from lawlab import config
from lawlab.rpc.convert import enum_name, enum_value
from lawlab.vocab import JudgeBackend, RunStatus

if TYPE_CHECKING:
    import grpc


@contextmanager
def _service(name: str, address: str | None, tasks_dir: str) -> Iterator[grpc.Channel]:
    """A channel to ``name``: the given address, or an ephemeral local service."""
    from lawlab.rpc.client import running_service
    from lawlab_ops.launcher import Cluster

    address = address or running_service(name)
    if address:
        from lawlab.rpc.client import sync_channel

        channel = sync_channel(address)
        try:
            yield channel
        finally:
            channel.close()
        return
    data = Path(tempfile.mkdtemp(prefix=f"lawlab-{name}-"))
    cluster = Cluster(Path(tasks_dir).resolve(), data, log_dir=data / "logs")
    print(f"[starting an ephemeral sandbox and {name} on loopback; logs in {data / 'logs'}]",
          file=sys.stderr)
    try:
        cluster.start(names=("sandbox", name), extra_env={"LAWLAB_LOG_LEVEL": "WARNING"},
                      progress=sys.stderr)
        channel = cluster.channel(name)
        try:
            yield channel
        finally:
            channel.close()
    finally:
        if all(code == 0 for code in cluster.stop().values()):
            shutil.rmtree(data, ignore_errors=True)  # kept, with its logs, when something failed


def _source(path: str) -> str:
    p = Path(path)
    if not p.is_file():
        raise SystemExit(f"--submission {path}: no such file")
    return p.read_text()


def _print(doc: dict[str, Any], as_json: bool, lines: list[str]) -> None:
    if as_json:
        print(json.dumps(doc, indent=2, default=float))
    else:
        print("\n".join(lines))


def cmd_score(args: argparse.Namespace) -> int:
    from lawlab.common.v1 import common_pb2
    from lawlab.scorer.v1 import scorer_pb2, scorer_pb2_grpc

    source = _source(args.submission)
    # a failed call becomes one line with a hint in lawlab_ops.cli.main (rpc_error_line)
    with _service("scorer", args.scorer_addr, args.tasks_dir) as channel:
        stub = scorer_pb2_grpc.ScorerServiceStub(channel)
        s = stub.ScoreSubmission(scorer_pb2.ScoreRequest(
            task_id=args.task, submission=common_pb2.Submission(source=source)), timeout=600)
    doc = MessageToDict(s, preserving_proto_field_name=True,
                        always_print_fields_with_no_presence=True)
    status = doc["status"] = enum_name(common_pb2.RunStatus, s.status)
    import math

    sub = f"{s.m_sub:.4g}" if math.isfinite(s.m_sub) else "not computed"
    lines = [f"{args.task}: status {status}; S_N {s.s_n:.3f} ({s.metric} {sub} against "
             f"the best reference {s.best_reference}, {s.m_ref:.4g})"]
    if s.message:
        lines.append(f"  {s.message}")
    for seed in s.seeds:
        if len(s.seeds) > 1:
            lines.append(f"  seed {seed.seed}: S_N {seed.s_n:.3f}, groups scored "
                         f"{seed.groups_scored}, failed {seed.groups_failed}, excluded "
                         f"{seed.groups_excluded}")
    if s.HasField("srbench"):
        sr = s.srbench
        lines.append(f"  Acc_{sr.tau:g}: {sr.acc_tau_id:g} in domain, {sr.acc_tau_ood:g} out of "
                     f"domain; NMSE {sr.nmse_id:.3g} in domain, {sr.nmse_ood:.3g} out")
    _print(doc, args.json, lines)
    return 0 if s.status == common_pb2.RUN_STATUS_OK else 1


def cmd_judge(args: argparse.Namespace) -> int:
    from lawlab.common.v1 import common_pb2
    from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc

    source = _source(args.submission)
    if args.kind == "structure" and args.law:
        return _structure_offline(args, source)
    if not args.task:
        raise SystemExit(f"lawlab judge {args.kind}: --task is required"
                         + (" (or --law and --base)" if args.kind == "structure" else ""))
    request = judge_pb2.JudgeRequest(task_id=args.task,
                                     submission=common_pb2.Submission(source=source),
                                     backend=enum_value(judge_pb2.JudgeBackend, args.backend,
                                                        "--backend"))
    with _service("judge", args.judge_addr, args.tasks_dir) as channel:
        stub = judge_pb2_grpc.JudgeServiceStub(channel)
        if args.kind == "validity":
            v = stub.JudgeValidity(request, timeout=600)
        else:
            v = stub.JudgeStructure(request, timeout=600)
    doc = MessageToDict(v, preserving_proto_field_name=True,
                        always_print_fields_with_no_presence=True)
    # the vocabulary's words in the text and the JSON, as in trajectories and the store
    status = doc["status"] = enum_name(common_pb2.RunStatus, v.status)
    backend = doc["backend"] = enum_name(judge_pb2.JudgeBackend, v.backend)
    if args.kind == "validity":
        s_v = f"{v.s_v:.3f}" if v.HasField("s_v") else f"null ({status}: {v.message[:200]})"
        if v.anti_hacking_reason.startswith("not parseable"):
            gate = f"the module does not parse ({v.anti_hacking_reason.split(': ', 1)[-1]})"
        else:
            gate = ("anti-hacking gate passed" if v.anti_hacking_passed else
                    "anti-hacking gate FAILED: " + v.anti_hacking_reason)
        run = "" if status == RunStatus.OK else f"; the submission did not run ({status}: " \
            f"{v.message[:200]})"
        lines = [f"{args.task}: S_V {s_v} [{backend}]; {gate}{run}"]
        lines += [f"  [{'x' if i.passed else ' '}] {i.item_id}: {i.evidence}" for i in v.items]
        lines += _official_rubric_lines(args, {i.item_id: (i.passed, i.evidence) for i in v.items},
                                        backend)
    else:
        print(f"[operator output: the lines below name {args.task}'s hidden mechanisms; do "
              "not pass them to a team being scored]", file=sys.stderr)
        confidence = doc["confidence"] = enum_name(judge_pb2.Confidence, v.confidence)
        level = f"{v.s_s:g}" if v.HasField("s_s") else f"null ({status})"
        lines = [f"{args.task}: level {level} ({confidence} confidence, {backend}): "
                 f"{v.explanation}",
                 f"  matched: {', '.join(v.matched) or '-'}", f"  missed: {', '.join(v.missed) or '-'}"]
    _print(doc, args.json, lines)
    # one rule with `lawlab score`: a module that did not compile, run or meet the
    # contract is exit 1, whatever it scored
    return 0 if status in (RunStatus.OK, "") else 1


def _official_rubric_lines(args: argparse.Namespace, verdicts: dict[str, tuple[bool, str]],
                           backend: str) -> list[str]:
    """An imported official task: each official sentence, judged or "not judged"."""
    from lawlab.judging import validity
    from lawlab.rpc.settings import Settings

    root = (Path(args.tasks_dir) if args.tasks_dir else config.tasks_dir()) / args.task
    model = Settings.from_env().judge.llm_model if backend != JudgeBackend.LLM else "judge model"
    # with the LLM backend every sentence has the model's verdict (official_<index>)
    rows = validity.official_rubric_rows(root, verdicts, model)
    if rows is None:
        return []
    judged = sum(mark != "?" for mark, _, _ in rows)
    out = [f"  official rubric: {len(rows)} sentences, {judged} judged here, "
           f"{len(rows) - judged} not judged"
           + (" (S_V above covers the judged ones only)" if judged < len(rows) else "")]
    return out + [f"  [{mark}] {text}: {evidence}" for mark, text, evidence in rows]


def _structure_offline(args: argparse.Namespace, source: str) -> int:
    """--law/--base: expressions over the submission's USED_INPUTS, compared on probes
    drawn from --range NAME=LO:HI (default 1:10 for every input)."""

    import numpy as np

    from lawlab.judging import structure
    from lawlab.law.contract import read_module
    from lawlab.law.expr import Expression, ExpressionError

    if not args.base:
        raise SystemExit("lawlab judge structure: --base is required with --law")
    try:
        used = read_module(source).used_inputs()
    except SyntaxError as err:
        raise SystemExit(f"--submission: {err}") from None
    if not used:
        raise SystemExit("--submission: no USED_INPUTS list")
    ranges = {n: (1.0, 10.0) for n in used}
    for spec in args.range or []:
        name, _, span = spec.partition("=")
        if name not in ranges:
            raise SystemExit(f"--range {spec!r}: {name!r} is not one of the submission's "
                             f"USED_INPUTS {used}")
        lo, _, hi = span.partition(":")
        try:
            ranges[name] = (float(lo), float(hi))
        except ValueError:
            raise SystemExit(f"--range {spec!r}: use NAME=LO:HI") from None
    values: dict[str, float] = {}
    for spec in args.const or []:
        name, _, value = spec.partition("=")
        try:
            values[name] = float(value)
        except ValueError:
            raise SystemExit(f"--const {spec!r}: use NAME=VALUE") from None
    forms = {}
    for flag, text in (("--law", args.law), ("--base", args.base)):
        try:
            e = Expression(text)
        except ExpressionError as err:
            raise SystemExit(f"{flag}: {err}") from None
        constants = {n: values.get(n, 1.0) for n in sorted(e.free(used))}
        unset = [n for n in constants if n not in values]
        if flag == "--law" and unset:
            # the law's curve depends on these values: a guessed 1.0 (or a misspelt
            # input) would judge against another law than the one meant
            raise SystemExit(
                f"--law: {', '.join(unset)} {'is' if len(unset) == 1 else 'are'} neither an "
                f"input of the submission (USED_INPUTS {used}) nor given a value: pass "
                + " ".join(f"--const {n}=VALUE" for n in unset) + " or fix the spelling")
        forms[flag] = structure.form_from_expression(e, constants, used)  # --base: refit
    rng = np.random.default_rng(0)
    probes = {n: rng.uniform(*ranges[n], 200) for n in used}
    law = Expression(args.law)
    constants = {n: values.get(n, 1.0) for n in sorted(law.free(used))}
    hidden = structure.HiddenLaw(law, constants, {}, [structure.Piece(args.law, "stated", {})],
                                 used, "linear", {"": probes}, base=forms["--base"])
    outcome = structure.judge_structure(source, hidden)
    doc = {"level": outcome.level, "matched": outcome.matched, "missed": outcome.missed,
           "confidence": outcome.confidence, "explanation": outcome.explanation}
    _print(doc, args.json, [f"level {outcome.level:g} ({outcome.confidence} confidence): "
                            f"{outcome.explanation}"])
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("score", help="S_N of a submission file (and LLM-SRBench metrics)")
    p.add_argument("--task", required=True)
    p.add_argument("--submission", required=True, help="a Python module in the contract")
    p.add_argument("--scorer-addr", help="a running scorer (default: the one `lawlab up` "
                   "runs, else an ephemeral one)")
    p.add_argument("--tasks-dir", default=str(config.tasks_dir()))
    p.add_argument("--json", action="store_true")
    judge = sub.add_parser("judge", help="validity (S_V) or structure (S_S) of a submission")
    kinds = judge.add_subparsers(dest="kind", required=True)
    for kind in ("validity", "structure"):
        q = kinds.add_parser(kind, description=(
            "S_V of a submission: the task's rubric and the anti-hacking gate." if kind ==
            "validity" else "S_S of a submission against the task's hidden law. An operator "
            "command: it needs the library with answer keys, and its matched / missed lines "
            "name the hidden law's mechanisms, so its output is not for the teams being "
            "scored. --law/--base compare against an expression of your own instead."))
        q.add_argument("--task", help="the task (its rubric or hidden law)")
        q.add_argument("--submission", required=True)
        q.add_argument("--judge-addr", help="a running judge (default: the one `lawlab up` "
                       "runs, else an ephemeral one)")
        q.add_argument("--backend", choices=["deterministic", "llm"], default="deterministic",
                       help="llm: the judge's optional LLM backend (LAWLAB_JUDGE_LLM_BASE_URL, "
                            "LAWLAB_JUDGE_LLM_MODEL in the judge's environment)")
        q.add_argument("--tasks-dir", default=str(config.tasks_dir()))
        q.add_argument("--json", action="store_true")
        if kind == "structure":
            q.add_argument("--law", help="hidden law expression (instead of --task)")
            q.add_argument("--base", help="published base form expression (with --law)")
            q.add_argument("--range", action="append", metavar="NAME=LO:HI",
                           help="probe range of an input (default 1:10)")
            q.add_argument("--const", action="append", metavar="NAME=VALUE",
                           help="value of a constant of --law (each is required) or a "
                                "starting value for --base (default 1.0)")
    sub.choices["score"].set_defaults(func=cmd_score)
    sub.choices["judge"].set_defaults(func=cmd_judge)
