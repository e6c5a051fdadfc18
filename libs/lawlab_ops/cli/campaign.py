"""``lawlab campaign``: run, watch, list, cancel and audit campaigns.

``lawlab campaign run`` talks to a running agent service (``--agent-addr``), or,
without one, starts every service on loopback for the duration of the run,
with its state in ``--data-dir`` (default var/run/campaigns): re-running the
same command after a crash resumes the campaign where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from lawlab import config
from lawlab.durations import eta_text
from lawlab_ops.cli.common import with_offline
from lawlab_ops.tables import table

if TYPE_CHECKING:
    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.results.aggregate import Row
    from lawlab_ops.memorization import Recall

SETTINGS = {"real": 1, "parallel": 2}


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def bar(done: int, total: int, width: int = 30) -> str:
    frac = done / total if total else 1.0
    full = int(frac * width)
    return "[" + "#" * full + "." * (width - full) + f"] {done}/{total} ({frac:.0%})"


def render(c: agent_pb2.Campaign) -> str:
    """A campaign snapshot as text: state, progress bar, ETA, then one row per slice."""
    from lawlab.agent.v1 import agent_pb2
    from lawlab.rpc import convert

    t = c.totals
    finished = t.completed + t.unsubmitted + t.failed
    state = agent_pb2.CampaignState.Name(c.state).removeprefix("CAMPAIGN_STATE_").lower()
    lines = [f"campaign {c.campaign_id}: {state}   {bar(finished, t.total)}   "
             f"running {t.running}  retries {t.retries}  ETA {eta_text(c.eta_seconds)}"]
    if c.error:
        lines.append(f"error: {c.error}")
    rows = []
    for s in c.slices:
        rows.append([s.agent + (f"/{s.model}" if s.model else ""), convert.setting_name(s.setting),
                     s.total, s.completed, s.unsubmitted, s.failed, s.running, s.pending,
                     _fmt(s.mean_s_n if s.HasField("mean_s_n") else None),
                     _fmt(s.mean_s_v if s.HasField("mean_s_v") else None),
                     _fmt(s.mean_s_s if s.HasField("mean_s_s") else None)])
    lines.append(table(rows, ["agent", "setting", "trials", "done", "unsubm.", "errors",
                              "running", "pending", "S_N", "S_V", "S_S"]))
    if t.failed:
        lines.append(f"{t.failed} trial(s) ended in error (given up after their attempts): "
                     "no score, kept out of every mean")
    if c.retries_by_cause:
        lines.append("failed attempts by cause: " + ", ".join(
            f"{k} {v}" for k, v in sorted(c.retries_by_cause.items())))
    return "\n".join(lines)


def spec_from_args(args: argparse.Namespace) -> agent_pb2.CampaignSpec:
    from lawlab.agent.v1 import agent_pb2

    doc: dict[str, Any] = {}
    if args.spec:
        text = Path(args.spec).read_text()
        if args.spec.endswith((".yaml", ".yml")):
            import yaml

            doc = yaml.safe_load(text) or {}
        else:
            doc = json.loads(text)
        if not isinstance(doc, dict):
            raise SystemExit(f"{args.spec}: expected a mapping of campaign fields")
    for key in ("name", "agents", "tasks", "settings", "contexts", "repeats", "seed",
                "concurrency", "max_attempts", "backoff_seconds", "decoding"):
        value = getattr(args, key, None)
        if value is not None:
            doc[key] = value
    agents = doc.get("agents") or ["template"]
    if isinstance(agents, str):
        agents = agents.split(",")
    spec = agent_pb2.CampaignSpec(name=str(doc.get("name") or ""))
    shared = doc.get("decoding") or {}
    if isinstance(shared, str):
        try:
            shared = json.loads(shared)
        except json.JSONDecodeError as err:
            raise SystemExit(f"--decoding: not JSON ({err.msg}); e.g. "
                             '\'{"max_completion_tokens": 8192, "temperature": 0.4}\'') from None
    from lawlab_ops.cli.common import split_agent

    for a in agents:
        agent, model = (split_agent(a) if isinstance(a, str)
                        else split_agent(str(a["agent"]), str(a.get("model", ""))))
        entry = agent_pb2.AgentModel(agent=agent.strip(), model=model.strip())
        own = a.get("decoding", {}) if isinstance(a, dict) else {}
        decoding = {**shared, **own} if agent.strip() == "openai" else own
        if decoding:
            try:
                entry.decoding.CopyFrom(agent_pb2.Decoding(**decoding))
            except (TypeError, ValueError) as err:
                raise SystemExit(f"decoding: {err}") from None
        spec.agents.append(entry)
    for key in ("tasks", "settings", "contexts"):
        value = doc.get(key) or {"tasks": ["all"], "settings": ["real", "parallel"],
                                 "contexts": ["full"]}[key]
        if isinstance(value, str):
            value = value.split(",")
        if key == "settings":
            unknown = [s for s in value if s not in SETTINGS]
            if unknown:
                raise SystemExit(f"--settings: unknown {unknown}; use real and/or parallel")
            spec.settings.extend(SETTINGS[s] for s in value)
        else:
            getattr(spec, key).extend(str(v).strip() for v in value)
    for key in ("repeats", "concurrency", "max_attempts"):
        if doc.get(key) is not None:
            setattr(spec, key, int(doc[key]))
    if doc.get("seed") is not None:
        spec.seed = int(doc["seed"])
    if doc.get("backoff_seconds") is not None:
        spec.backoff_seconds = float(doc["backoff_seconds"])
    return spec


def watch(stub: agent_pb2_grpc.AgentServiceStub, campaign_id: str, out: TextIO | None = None,
          live: bool | None = None) -> agent_pb2.Campaign:
    """Follow a campaign until it stops; returns the last snapshot. ``out`` is
    looked up at call time (sys.stdout may have been replaced since import)."""
    from lawlab.agent.v1 import agent_pb2

    out = out or sys.stdout
    live = out.isatty() if live is None else live
    last: agent_pb2.Campaign | None = None
    shown = ""
    for snap in stub.WatchCampaign(agent_pb2.GetCampaignRequest(campaign_id=campaign_id)):
        last = snap
        text = render(snap)
        if live:
            out.write("\x1b[H\x1b[J" + text + "\n")
        elif text.splitlines()[0] != shown:  # one progress line per change in a log
            shown = text.splitlines()[0]
            out.write(shown + "\n")
        out.flush()
    if last is None:
        raise RuntimeError(f"campaign {campaign_id}: the agent service sent no snapshot")
    return last


def cmd_campaign(args: argparse.Namespace) -> int:
    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.rpc.client import sync_channel

    if args.verb == "audit":
        return cmd_audit(args)
    if args.verb == "run" and not args.agent_addr:
        from lawlab.rpc.client import running_service

        args.agent_addr = running_service("agent")
        if args.agent_addr:
            print(f"using the running services (agent at {args.agent_addr})", flush=True)
        elif args.detach:
            print("lawlab campaign run --detach needs running services: start them with "
                  "`lawlab up` in another terminal (or pass --agent-addr)", file=sys.stderr)
            return 2
        else:
            return _run_embedded(args)
    if args.verb in ("status", "trials", "list"):
        from lawlab_ops.cli.common import agent_or_offline

        with agent_or_offline(args) as address:
            return _read(args, address)
    address = args.agent_addr or config.service_address("agent")
    with sync_channel(address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        if args.verb == "run":
            return _start_and_watch(stub, args)
        if args.verb == "cancel":
            print(render(stub.CancelCampaign(agent_pb2.GetCampaignRequest(
                campaign_id=args.campaign_id))))
            return 0
    raise AssertionError(args.verb)


def _read(args: argparse.Namespace, address: str) -> int:
    """campaign list / trials / status: read from an agent service (running or a view)."""
    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.rpc import convert
    from lawlab.rpc.client import sync_channel

    with sync_channel(address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        if args.verb == "list":
            rows = []
            for c in stub.ListCampaigns(agent_pb2.ListCampaignsRequest()).campaigns:
                t = c.totals
                rows.append([c.campaign_id,
                             agent_pb2.CampaignState.Name(c.state).removeprefix(
                                 "CAMPAIGN_STATE_").lower(),
                             t.total, t.completed + t.unsubmitted + t.failed, t.failed,
                             time.strftime("%Y-%m-%d %H:%M", time.localtime(c.created))])
            print(table(rows, ["campaign", "state", "trials", "finished", "failed", "created"]))
            return 0
        if args.verb == "trials":
            trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=args.campaign_id))
            rows = [[t.task_id, t.agent + (f"/{t.model}" if t.model else ""),
                     convert.setting_name(t.setting), t.context, t.seed,
                     convert.enum_name(agent_pb2.TrialStatus, t.status),
                     t.attempts, convert.enum_name(agent_pb2.FailureCause, t.cause) or "-",
                     _fmt(t.scores.s_n if t.scores.HasField("s_n") else None),
                     _fmt(t.scores.s_v if t.scores.HasField("s_v") else None),
                     _fmt(t.scores.s_s if t.scores.HasField("s_s") else None)]
                    for t in trials.trials]
            print(table(rows, ["task", "agent", "setting", "context", "seed", "status",
                               "attempts", "cause", "S_N", "S_V", "S_S"]))
            return 0
        # status
        if args.watch:
            last = watch(stub, args.campaign_id)
            if last is not None and not sys.stdout.isatty():
                print(render(last))
        else:
            print(render(stub.GetCampaign(agent_pb2.GetCampaignRequest(
                campaign_id=args.campaign_id))))
        return 0


CONFIRM_ABOVE = 100  # trials: a larger grid asks first at a terminal (--yes skips)


def render_preview(p: agent_pb2.CampaignPreview) -> str:
    """What a campaign would run, by agent and setting, and every dropped cell."""
    from lawlab.rpc import convert

    counts: dict[tuple[str, str], int] = {}
    for c in p.cells:
        key = (c.agent + (f"/{c.model}" if c.model else ""), convert.setting_name(c.setting))
        counts[key] = counts.get(key, 0) + 1
    lines = [f"campaign {p.campaign_id}: {len(p.cells)} trials to run"
             + (f" ({p.already_finished} finished earlier, kept)" if p.already_finished else "")]
    if counts:
        lines.append(table([[a, st, n] for (a, st), n in sorted(counts.items())],
                           ["agent", "setting", "trials"]))
    if p.dropped:
        lines.append(f"{len(p.dropped)} requested cells will not run:")
        for d in p.dropped[:PREVIEW_DROPPED]:
            lines.append(f"  {d.task_id} {convert.setting_name(d.setting)} "
                         f"{d.agent + (f'/{d.model}' if d.model else '')}: {d.reason}")
        if len(p.dropped) > PREVIEW_DROPPED:
            lines.append(f"  ... and {len(p.dropped) - PREVIEW_DROPPED} more")
    if not p.cells and not p.already_finished:
        lines.append("nothing to run: choose tasks that offer the selected settings")
    return "\n".join(lines)


PREVIEW_DROPPED = 30


def _start_and_watch(stub: agent_pb2_grpc.AgentServiceStub, args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from lawlab.agent.v1 import agent_pb2

    request = agent_pb2.StartCampaignRequest(
        spec=spec_from_args(args), retry_failed=bool(getattr(args, "retry_failed", False)))
    if not getattr(args, "json", False) or getattr(args, "dry_run", False):
        preview = stub.PreviewCampaign(request)
        print(render_preview(preview), flush=True)
        if getattr(args, "dry_run", False):
            return 0
        if not preview.cells and not preview.already_finished:
            return 1
        n = len(preview.cells)
        if n > CONFIRM_ABOVE and not getattr(args, "yes", False) and sys.stdin.isatty():
            answer = input(f"start {n} trials? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                print("not started (--dry-run previews without asking; --yes skips the question)")
                return 1
    snap = stub.StartCampaign(request)
    args.started_campaign = snap.campaign_id
    print(f"campaign {snap.campaign_id}: {snap.totals.total} trials "
          f"(status: lawlab campaign status {snap.campaign_id} --watch)", flush=True)
    if args.detach:
        return 0
    last = watch(stub, snap.campaign_id) or snap
    if args.json:
        print(json.dumps(MessageToDict(last), indent=2))
    else:
        print(render(last))
    return exit_status(last, getattr(args, "max_errors", 0))


def exit_status(last: agent_pb2.Campaign, max_errors: int) -> int:
    """0 only when the campaign finished with at most ``max_errors`` trials in
    error: a table over trials that never ran is not a result."""
    from lawlab.agent.v1 import agent_pb2

    if last.state != agent_pb2.CAMPAIGN_STATE_FINISHED:
        return 1
    if last.totals.failed > max_errors:
        print(f"lawlab campaign: {last.totals.failed} of {last.totals.total} trials ended in "
              f"error (more than --max-errors {max_errors}); exit status 1. `lawlab campaign "
              f"trials {last.campaign_id}` names each one's cause; `--retry-failed` runs them again",
              file=sys.stderr)
        return 1
    return 0


def _run_embedded(args: argparse.Namespace) -> int:
    from lawlab.agent.v1 import agent_pb2_grpc
    from lawlab_ops.launcher import Cluster

    data_dir = Path(args.data_dir).resolve() / "campaigns"
    cluster = Cluster(Path(args.tasks_dir).resolve(), data_dir, log_dir=data_dir / "logs")
    print(f"no running services found: starting them on loopback for this run (state in "
          f"{data_dir}; `lawlab up` in another terminal keeps them, and campaigns stay "
          "inspectable while they run) ...", flush=True)
    try:
        cluster.start(progress=sys.stdout)
        with cluster.channel("agent") as channel:
            code = _start_and_watch(agent_pb2_grpc.AgentServiceStub(channel), args)
    finally:
        cluster.stop()
    print(f"trajectories in {data_dir / 'trajectories'}; service logs in {cluster.log_dir}")
    name = getattr(args, "started_campaign", None) or args.name or "CAMPAIGN"
    print(f"the services stopped with the run; to inspect the campaign (no service needed): "
          f"`lawlab campaign trials {name} --data-dir {data_dir}`, "
          f"`lawlab report {name} --data-dir {data_dir}`, or `lawlab view --data-dir {data_dir}`")
    return code


# ---- audit ------------------------------------------------------------------------------

# attempts to reach hidden material from agent code
PROBES = {
    "os/sys access": re.compile(r"\b(?:import\s+(?:os|sys|subprocess|shutil|pathlib)\b|"
                                r"__import__|sys\.modules|os\.(?:environ|system|listdir|popen))"),
    "file read": re.compile(r"\bopen\s*\(|read_csv\s*\(\s*['\"]/|np\.load\s*\(|glob\.|"
                            r"/proc/|/etc/|\.\./"),
    "network": re.compile(r"\b(?:socket|urllib|requests|http\.client|urlopen)\b"),
    # `{"__builtins__": {}}` takes builtins away (the built-in agents' own restricted
    # eval): not an escape attempt, so not a finding
    "introspection": re.compile(r"__subclasses__|__globals__|"
                                r"__builtins__(?!['\"]\s*:\s*\{\s*\})|\bgc\.|\binspect\.|"
                                r"_getframe|f_back|\bctypes\b|importlib"),
}


def _hidden_strings(tasks_dir: Path, task_id: str) -> list[str]:
    """Distinctive pieces of the task's answer key: the hidden law and its long constants."""
    path = tasks_dir / task_id / "simulator" / "world.json"
    if not path.exists():
        return []
    world = json.loads(path.read_text())
    law = world.get("law") or {}
    out = []
    expr = law.get("expr") if isinstance(law, dict) else None
    if isinstance(expr, str) and len(expr) >= 8:
        out.append(expr)
    constants = law.get("constants", {}) if isinstance(law, dict) else {}
    for value in constants.values():
        text = repr(float(value))
        if len(text.replace("-", "").replace(".", "")) >= 7:  # long enough not to collide by chance
            out.append(text)
    return out


def audit_events(events: list[dict[str, Any]], hidden: list[str]
                 ) -> list[tuple[int, str, str]]:
    findings = []
    for ev in events:
        if ev.get("type") != "turn":
            continue
        turn = int(ev.get("turn", 0))
        reply = str(ev.get("reply", ""))
        code = reply if ev.get("tool") == "python" else ""
        for label, pattern in PROBES.items():
            m = pattern.search(code)
            if m:
                findings.append((turn, label, m.group(0)))
        result = str(ev.get("result", ""))
        for piece in hidden:
            if piece in result:
                findings.append((turn, "HIDDEN LAW IN TOOL OUTPUT", piece[:60]))
    return findings


def audit_submissions(args: argparse.Namespace) -> int:
    """The trajectories external teams uploaded with their submissions in an epoch,
    audited like lawlab's own (docs/simulator-api.md)."""
    import grpc

    from lawlab.simulator.v1 import operator_pb2, operator_pb2_grpc
    from lawlab_ops.cli.operators import operator_channel, refused

    rows, leaks, flagged, read, subs = [], 0, 0, 0, 0
    try:
        with operator_channel(args) as channel:
            uploads = list(operator_pb2_grpc.OperatorServiceStub(channel).ListTrajectories(
                operator_pb2.ListTrajectoriesRequest(epoch=args.epoch), timeout=600))
    except grpc.RpcError as err:
        return refused("campaign audit", err)
    for s in uploads:
        subs += 1
        if s.error:
            rows.append([s.submission_id, s.team, "-", "unreadable", s.error[:60]])
            continue
        if not s.jsonl:
            continue
        try:
            events = [json.loads(line) for line in s.jsonl.splitlines() if line.strip()]
        except json.JSONDecodeError as err:
            rows.append([s.submission_id, s.team, "-", "unreadable", str(err)[:60]])
            continue
        read += 1
        found = audit_events(events, _hidden_strings(Path(args.tasks_dir), s.task_id))
        flagged += bool(found)
        for turn, label, evidence in found:
            leaks += label.startswith("HIDDEN")
            rows.append([s.submission_id, s.team, str(turn), label, evidence.replace("\n", " ")])
    print(f"audited {read} uploaded trajectories of {subs} submissions in epoch {args.epoch}")
    if rows:
        print(table(rows, ["submission", "team", "turn", "finding", "evidence"]))
    print(f"{flagged} trajectory(ies) with findings; hidden-law strings in tool outputs: {leaks}")
    return 1 if leaks else 0


def cmd_audit(args: argparse.Namespace) -> int:
    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.rpc.client import sync_channel

    if getattr(args, "epoch", None):
        return audit_submissions(args)
    if not args.campaign_id:
        print("lawlab campaign audit: give a campaign id, or --epoch NAME for external "
              "submissions", file=sys.stderr)
        return 2
    tasks_dir = Path(args.tasks_dir)
    rows, leaks, flagged = [], 0, 0
    from lawlab_ops.cli.common import agent_or_offline

    with agent_or_offline(args) as address, sync_channel(address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=args.campaign_id)).trials
        for t in trials:
            hidden = _hidden_strings(tasks_dir, t.task_id)
            for attempt in range(1, t.attempts + 1):
                try:
                    resp = stub.GetTrajectory(agent_pb2.GetTrajectoryRequest(
                        trial_id=t.trial_id, attempt=attempt))
                except Exception as err:  # noqa: BLE001  (reported, the audit goes on)
                    rows.append([t.trial_id, attempt, "-", "unreadable", str(err)[:60]])
                    continue
                events = [json.loads(e) for e in resp.events]
                found = audit_events(events, hidden)
                flagged += bool(found)
                for turn, label, evidence in found:
                    leaks += label.startswith("HIDDEN")
                    rows.append([t.trial_id, attempt, turn, label, evidence.replace("\n", " ")])
    print(f"audited {len(trials)} trials of campaign {args.campaign_id}")
    if rows:
        print(table(rows, ["trial", "attempt", "turn", "finding", "evidence"]))
    print(f"{flagged} attempt(s) with findings; hidden-law strings in tool outputs: {leaks}")
    return 1 if leaks else 0


def rows_from_trials(trials: list[agent_pb2.Trial], tasks_dir: Path) -> list[Row]:
    """Trial protos -> report rows, with each task's discipline, type and suite."""
    from lawlab.agent.v1 import agent_pb2
    from lawlab.common.v1 import common_pb2
    from lawlab.results.aggregate import Row
    from lawlab.rpc.convert import from_enum
    from lawlab.tasks.library import TaskLibrary
    from lawlab.vocab import RunStatus, Setting, TrialStatus, Unset, word_of

    library = TaskLibrary(tasks_dir)
    rows = []
    for t in trials:
        meta = library.get(t.task_id).meta if t.task_id in library else None
        notes = t.score_notes or ""
        score_status: RunStatus | Unset = ""
        if "S_N " in notes:  # the scoring note: "S_N <run status>: ..."
            word = notes.split("S_N ", 1)[1].split(":", 1)[0].strip()
            score_status = word_of(RunStatus, word) or ""

        def score(name: str) -> float | None:
            return getattr(t.scores, name) if t.scores.HasField(name) else None

        rows.append(Row(
            agent=t.agent + (f"/{t.model}" if t.model else ""),
            setting=Setting(from_enum(Setting, common_pb2.Setting, t.setting, "setting")),
            context=t.context or "full", task_id=t.task_id, seed=t.seed,
            status=TrialStatus(from_enum(TrialStatus, agent_pb2.TrialStatus, t.status, "status")),
            score_status=score_status, s_n=score("s_n"), s_v=score("s_v"), s_s=score("s_s"),
            discipline=meta.discipline if meta else "", multi_group=bool(meta and
                                                                         meta.multi_group),
            world_fingerprint=t.world_fingerprint,
            suite=meta.suite if meta else "real", trial_id=t.trial_id,
            prompt_tokens=t.prompt_tokens, completion_tokens=t.completion_tokens))
    return rows


SELECT_PROMPT = """Task: {title}
{context}
Target: {target}. Inputs: {inputs}.

Training data (CSV):
{data}

Below are {k} candidate laws (Python modules) proposed for this task. Choose the one you
expect to predict held-out data best while being scientifically valid. Reply with its
number inside <choice>...</choice>.

{candidates}"""


def llm_selector(args: argparse.Namespace, sources: dict[str, str]
                 ) -> Callable[[str, str, list[Any]], int]:
    """The knockout selector: the model sees the task, the full training set and the
    candidate programs (never held-out data or scores) and names one."""
    from lawlab.tasks.library import TaskLibrary
    from lawlab_ops.memorization import ask

    base_url = args.llm_base_url or os.environ.get("LAWLAB_LLM_BASE_URL", "")
    if not base_url:
        raise SystemExit("--selector-model needs --llm-base-url (or LAWLAB_LLM_BASE_URL)")
    key = os.environ.get("LAWLAB_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY", "")
    library = TaskLibrary(Path(args.tasks_dir))
    fallbacks = [0]

    def select(agent: str, task_id: str, candidates: list[Any]) -> int:
        meta = library.get(task_id).meta
        data = library.get(task_id).train.to_csv(index=False)[:100_000]
        blocks = "\n\n".join(f"Candidate {i + 1}:\n```python\n{sources.get(c.trial_id, '')}\n```"
                              for i, c in enumerate(candidates))
        prompt = SELECT_PROMPT.format(title=meta.title, context=meta.context,
                                      target=meta.target.name,
                                      inputs=", ".join(meta.input_names), data=data,
                                      k=len(candidates), candidates=blocks)
        for _ in range(2):
            found = re.search(r"<choice>\s*(\d+)\s*</choice>",
                              ask(base_url, key, args.selector_model, prompt))
            if found and 1 <= int(found.group(1)) <= len(candidates):
                return int(found.group(1)) - 1
        fallbacks[0] += 1
        print(f"selector: no valid choice for {task_id} ({agent}); the first candidate "
              f"stands (fallbacks so far: {fallbacks[0]})", file=sys.stderr)
        return 0

    return select


def cmd_report(args: argparse.Namespace) -> int:
    from lawlab.agent.v1 import agent_pb2, agent_pb2_grpc
    from lawlab.rpc.client import sync_channel
    from lawlab_ops.cli.common import agent_or_offline
    from lawlab_ops.report import write_report

    with agent_or_offline(args) as address, sync_channel(address) as channel:
        stub = agent_pb2_grpc.AgentServiceStub(channel)
        trials = stub.ListTrials(agent_pb2.ListTrialsRequest(campaign_id=args.campaign_id)).trials
    if not trials:
        print(f"campaign {args.campaign_id} has no trials yet", file=sys.stderr)
        return 1
    out = Path(args.out or f"reports/{args.campaign_id}")
    select = None
    if args.selector_model:
        select = llm_selector(args, {t.trial_id: t.submission.source for t in trials})
    rows = rows_from_trials(trials, Path(args.tasks_dir))
    from lawlab.results.aggregate import MixedSuites

    prices = None
    if args.prices:
        from lawlab.results.prices import PriceListError, load

        try:
            prices = load(args.prices)
        except PriceListError as err:
            print(f"lawlab report: {err}", file=sys.stderr)
            return 2
    try:
        files = write_report(rows, out, args.campaign_id, select, prices)
    except MixedSuites as err:
        print(f"lawlab report: {err}", file=sys.stderr)
        return 2
    print(f"wrote {len(files)} files into {out}/: " + ", ".join(files))
    return 0


def cmd_audit_memorization(args: argparse.Namespace) -> int:
    from lawlab.tasks.library import TaskLibrary
    from lawlab_ops import memorization

    base_url = args.llm_base_url or os.environ.get("LAWLAB_LLM_BASE_URL", "")
    if not base_url:
        print("--llm-base-url (or LAWLAB_LLM_BASE_URL) is required: the endpoint of the "
              "models to audit", file=sys.stderr)
        return 2
    key = os.environ.get("LAWLAB_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY", "")
    library = TaskLibrary(Path(args.tasks_dir))
    chosen = []
    for sel in args.tasks.split(","):
        kind, _, value = sel.partition(":")
        if sel == "all":
            chosen += [t for t in library if t.meta.suite == "real"]
        elif kind == "suite":
            chosen += [t for t in library if t.meta.suite == value]
        elif sel in library:
            chosen.append(library.get(sel))
        else:
            print(f"--tasks: {sel!r} is neither a task id nor all / suite:NAME", file=sys.stderr)
            return 2
    models = [m for m in args.models.split(",") if m]
    total = len(chosen) * len(models)
    done = [0]

    def progress(r: Recall) -> None:
        done[0] += 1
        hits = sum(s.matched for s in r.samples)
        print(f"{bar(done[0], total, 20)}  {r.task_id} / {r.model}: {hits}/{len(r.samples)} "
              f"match {r.reference}" + ("  (cold-recalled)" if r.recalled else ""), flush=True)

    recalls, tiers = memorization.audit(chosen, models, base_url, key, samples=args.samples,
                                        progress=progress)
    out = Path(args.out)
    memorization.write(recalls, tiers, out)
    counts = {t: sum(1 for v in tiers.values() if v == t) for t in ("Canon", "Mid", "Moat")}
    print(f"tiers: {counts}; wrote {out}/memorization.md and memorization.json")
    return 0


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = sub.add_parser("audit", help="audits of models").add_subparsers(dest="kind",
                                                                            required=True)
    p = audit.add_parser("memorization", help="data-free recall of published laws, per model")
    p.add_argument("--models", required=True, help="comma list of model names")
    p.add_argument("--tasks", default="all", help="ids, all (real-data tasks), suite:NAME")
    p.add_argument("--samples", type=int, default=5)
    p.add_argument("--llm-base-url", help="OpenAI-compatible endpoint (env LAWLAB_LLM_BASE_URL)")
    p.add_argument("--out", default="reports/memorization")
    p.add_argument("--tasks-dir", default=str(config.tasks_dir()))
    p = sub.add_parser("report", help="a campaign's leaderboard, analyses and figures")
    p.add_argument("campaign_id")
    p.add_argument("--out", help="folder (default reports/<campaign>)")
    p.add_argument("--selector-model", help="knockout self-selection by this model (the "
                                            "endpoint: --llm-base-url or LAWLAB_LLM_BASE_URL)")
    p.add_argument("--llm-base-url")
    p.add_argument("--prices", default=os.environ.get("LAWLAB_PRICES") or None,
                   help="a price list (YAML: provider/model: {prompt: USD per 1M tokens, "
                        "completion: ...}; env LAWLAB_PRICES): the tokens' cost per model")
    p.add_argument("--agent-addr", default=os.environ.get("LAWLAB_AGENT_ADDR"))
    p.add_argument("--tasks-dir", default=str(config.tasks_dir()))
    with_offline(p)

    campaign = sub.add_parser("campaign", help="campaigns: grids of trials").add_subparsers(
        dest="verb", required=True)
    p = campaign.add_parser("run", help="start (or resume) a campaign and follow it")
    p.add_argument("--spec", help="a YAML or JSON file with the fields below")
    p.add_argument("--name", help="the campaign id (default: a hash of the grid)")
    p.add_argument("--agents", help="comma list of agents and provider/model names, e.g. "
                                    "sr,template,openai/gpt-4o (agent:model works too)")
    p.add_argument("--decoding", help="JSON decoding overrides for the LLM agents, e.g. "
                                      '\'{"max_completion_tokens": 8192, "temperature": 0.4}\' '
                                      "(default: the model family's, docs/agents.md)")
    p.add_argument("--tasks", help="comma list of task ids or selectors: all, suite:real, "
                                   "suite:lsr-transform, type:II, discipline:physics")
    p.add_argument("--settings", help="real,parallel (default both)")
    p.add_argument("--contexts", help="full,no_var_detail,anonymous_names,numeric_only")
    p.add_argument("--repeats", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--concurrency", type=int)
    p.add_argument("--max-attempts", dest="max_attempts", type=int)
    p.add_argument("--backoff-seconds", dest="backoff_seconds", type=float)
    p.add_argument("--detach", action="store_true", help="start it and return")
    p.add_argument("--dry-run", action="store_true",
                   help="show the grid and every dropped cell with its reason; run nothing")
    p.add_argument("--yes", action="store_true",
                   help=f"do not ask before a grid of more than {CONFIRM_ABOVE} trials")
    p.add_argument("--max-errors", dest="max_errors", type=int, default=0,
                   help="trials that may end in error (infrastructure, after their attempts) "
                        "with exit status 0 (default 0)")
    p.add_argument("--retry-failed", action="store_true",
                   help="also re-run trials that ended in error in an earlier run")
    p.add_argument("--json", action="store_true")
    p.add_argument("--agent-addr", help="a running agent service (default: start all services "
                                        "on loopback for this run)")
    p.add_argument("--tasks-dir", default=str(config.tasks_dir()))
    p.add_argument("--data-dir", default=str(config.data_dir()))
    for verb, text in (("status", "progress of one campaign"), ("cancel", "stop launching trials"),
                       ("trials", "the trials of a campaign"),
                       ("audit", "scan transcripts for attempts to reach hidden material")):
        p = campaign.add_parser(verb, help=text)
        p.add_argument("campaign_id", nargs="?" if verb == "audit" else None)
        p.add_argument("--agent-addr", default=os.environ.get("LAWLAB_AGENT_ADDR"))
        if verb == "status":
            p.add_argument("--watch", action="store_true", help="follow until it stops")
        if verb in ("status", "trials"):
            with_offline(p)
        if verb == "audit":
            from lawlab_ops.cli.operators import operator_args

            p.add_argument("--epoch", help="audit the trajectories external teams uploaded with "
                                           "their submissions in this epoch instead (through "
                                           "the simulator's operator API)")
            operator_args(p)  # --tasks-dir: the task library with answer keys (operators only)
    p = campaign.add_parser("list", help="every campaign of the agent service")
    p.add_argument("--agent-addr", default=os.environ.get("LAWLAB_AGENT_ADDR"))
    with_offline(p)
    sub.choices["campaign"].set_defaults(func=cmd_campaign)
    sub.choices["report"].set_defaults(func=cmd_report)
    sub.choices["audit"].set_defaults(func=cmd_audit_memorization)
