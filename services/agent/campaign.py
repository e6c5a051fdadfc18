"""Campaign grids: validation, expansion into trial cells, progress summaries.

A campaign is agents/models x tasks x settings x contexts x repeats. Its id
is its name, or a hash of the normalised grid, so submitting the same grid
twice names the same campaign (and resumes it). Trial ids derive from the
cell alone, so two campaigns that share a cell share its trial.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from typing import Any

from lawlab import convert
from lawlab.agent.v1 import agent_pb2
from lawlab.common.v1 import common_pb2
from lawlab.errors import InvalidArgument
from lawlab_agent.store import CampaignRow, Cell, Tally
from lawlab_agent.views import CONTEXTS

MAX_CELLS = 100_000
_STATE = {
    "running": agent_pb2.CAMPAIGN_STATE_RUNNING,
    "finished": agent_pb2.CAMPAIGN_STATE_FINISHED,
    "failed": agent_pb2.CAMPAIGN_STATE_FAILED,
    "cancelled": agent_pb2.CAMPAIGN_STATE_CANCELLED,
    "interrupted": agent_pb2.CAMPAIGN_STATE_INTERRUPTED,
}


def trial_id_for(task_id: str, setting: str, agent: str, model: str, seed: int,
                 context: str = "full", decoding: str = "") -> str:
    key = f"{task_id}|{setting}|{agent}|{model}|{seed}"
    if context and context != "full":  # ids of full-context trials predate ablations
        key += f"|{context}"
    if decoding:  # the same model decoded differently is another trial
        key += f"|{decoding}"
    return f"{task_id}-{setting}-{agent}-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def decoding_doc(pb: agent_pb2.Decoding, field: str, model: str | None) -> dict:
    """The decoding overrides that are set, as a plain dict; checked against the LLM
    backend's rules when ``model`` is given (INVALID_ARGUMENT naming the field)."""
    doc: dict = {}
    if pb.family:
        doc["family"] = pb.family
    if pb.max_completion_tokens:
        doc["max_completion_tokens"] = int(pb.max_completion_tokens)
    if pb.HasField("temperature"):
        doc["temperature"] = float(pb.temperature)
    if pb.reasoning_effort:
        doc["reasoning_effort"] = pb.reasoning_effort
    if pb.max_completion_tokens < 0:
        raise InvalidArgument(f"{field}.max_completion_tokens", "must be positive")
    if doc and model is not None:
        from lawlab_agent.llm import decoding_for
        from lawlab_agent.policy import ConfigurationError

        try:
            decoding_for(model or "unnamed", doc)
        except ConfigurationError as err:
            raise InvalidArgument(field, str(err)) from None
    return doc


def decoding_json(doc: dict) -> str:
    return json.dumps(doc, sort_keys=True) if doc else ""


def decoding_pb(text_or_doc: str | dict) -> agent_pb2.Decoding:
    doc = json.loads(text_or_doc) if isinstance(text_or_doc, str) and text_or_doc else \
        (text_or_doc or {})
    pb = agent_pb2.Decoding(family=doc.get("family", ""),
                            max_completion_tokens=int(doc.get("max_completion_tokens", 0)),
                            reasoning_effort=doc.get("reasoning_effort", ""))
    if doc.get("temperature") is not None:
        pb.temperature = float(doc["temperature"])
    return pb


def normalise(spec: agent_pb2.CampaignSpec, agents: set[str]) -> dict:
    """The spec as a plain dict with defaults filled; INVALID_ARGUMENT names the field."""
    if not spec.agents:
        raise InvalidArgument("spec.agents", "at least one agent is required")
    pairs = []
    for i, a in enumerate(spec.agents):
        if a.agent not in agents:
            raise InvalidArgument(f"spec.agents[{i}].agent",
                                  f"unknown agent {a.agent!r}; available: {sorted(agents)}")
        decoding = decoding_doc(a.decoding, f"spec.agents[{i}].decoding",
                                a.model if a.agent == "openai" else None)
        if decoding and a.agent != "openai":
            raise InvalidArgument(f"spec.agents[{i}].decoding",
                                  f"applies to LLM backends (openai) only, not {a.agent!r}")
        pairs.append([a.agent, a.model, decoding])
    if not spec.tasks:
        raise InvalidArgument("spec.tasks", "at least one task id or selector (e.g. 'all')")
    settings = []
    for i, s in enumerate(spec.settings):
        name = convert.setting_name(s)
        if name == "unspecified":
            raise InvalidArgument(f"spec.settings[{i}]", "must be SETTING_REAL or SETTING_PARALLEL")
        settings.append(name)
    contexts = list(spec.contexts) or ["full"]
    for i, c in enumerate(contexts):
        if c not in CONTEXTS:
            raise InvalidArgument(f"spec.contexts[{i}]",
                                  f"unknown context {c!r}; one of {', '.join(CONTEXTS)}")
    if spec.repeats < 0 or spec.concurrency < 0 or spec.max_attempts < 0:
        raise InvalidArgument("spec", "repeats, concurrency and max_attempts must be >= 0")
    if spec.backoff_seconds < 0 or spec.backoff_seconds != spec.backoff_seconds:
        raise InvalidArgument("spec.backoff_seconds", "must be a number >= 0")
    if spec.concurrency > 64:
        raise InvalidArgument("spec.concurrency", "at most 64 trials at once")
    doc: dict[str, Any] = {
        "agents": pairs,
        "tasks": list(spec.tasks),
        "settings": sorted(set(settings or ["real", "parallel"]), key=["real", "parallel"].index),
        "contexts": contexts,
        "repeats": spec.repeats or 1,
        "seed": spec.seed,
        "max_attempts": spec.max_attempts or 3,
        "backoff_seconds": spec.backoff_seconds if spec.HasField("backoff_seconds") else 2.0,
        "concurrency": spec.concurrency or 2,
    }
    grid = {k: doc[k] for k in ("agents", "tasks", "settings", "contexts", "repeats", "seed")}
    doc["name"] = spec.name or "c-" + hashlib.sha256(
        json.dumps(grid, sort_keys=True).encode()).hexdigest()[:12]
    if not all(ch.isalnum() or ch in "-_." for ch in doc["name"]) or len(doc["name"]) > 100:
        raise InvalidArgument("spec.name", "use letters, digits, '-', '_' and '.' (at most 100)")
    return doc


def select_tasks(selectors: list[str],
                 tasks: list[common_pb2.TaskMetadata]) -> list[common_pb2.TaskMetadata]:
    """Task ids and selectors (all, suite:NAME, type:I|II, discipline:NAME), matched
    without regard to case; a selector that matches nothing lists the valid values."""
    import difflib

    by_id = {t.task_id.lower(): t for t in tasks}
    suites = sorted({t.suite for t in tasks})
    disciplines = sorted({t.discipline for t in tasks})
    chosen: dict[str, common_pb2.TaskMetadata] = {}
    for i, sel in enumerate(selectors):
        kind, _, value = sel.strip().partition(":")
        kind, low = kind.lower(), value.strip().lower()
        field = f"spec.tasks[{i}]"
        if sel.strip().lower() == "all":
            found = list(tasks)
        elif kind == "suite" and value:
            found = [t for t in tasks if t.suite.lower() == low]
            if not found:
                raise InvalidArgument(field, f"no suite {value!r}; suites: {', '.join(suites)}")
        elif kind == "type" and value:
            if low not in ("i", "ii"):
                raise InvalidArgument(field, f"type {value!r}: use type:I (one group) or "
                                      "type:II (several groups)")
            multi = low == "ii"
            found = [t for t in tasks if (t.type == common_pb2.TASK_TYPE_MULTI_GROUP) == multi]
        elif kind == "discipline" and value:
            found = [t for t in tasks if t.discipline.lower() == low]
            if not found:
                raise InvalidArgument(field, f"no discipline {value!r}; disciplines: "
                                      + ", ".join(disciplines))
        elif sel.strip().lower() in by_id:
            found = [by_id[sel.strip().lower()]]
        else:
            close = difflib.get_close_matches(sel.strip().lower(), list(by_id), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise InvalidArgument(field, f"{sel!r} is neither a task id{hint} nor a selector "
                                  "(all, suite:NAME, type:I, type:II, discipline:NAME); "
                                  "`lawlab tasks list` shows the ids")
        if not found:
            raise InvalidArgument(field, f"selector {sel!r} matches no task")
        for t in found:
            chosen.setdefault(t.task_id, t)
    return list(chosen.values())


def expand(doc: dict, tasks: list[common_pb2.TaskMetadata]) -> list[Cell]:
    """Every cell of the grid; a task is paired only with settings it supports."""
    cells = []
    chosen = select_tasks(doc["tasks"], tasks)
    for entry in doc["agents"]:
        agent, model = entry[0], entry[1]
        decoding = decoding_json(entry[2] if len(entry) > 2 else {})
        for setting in doc["settings"]:
            for t in chosen:
                supported = {convert.setting_name(s) for s in t.settings} or {"real"}
                if setting not in supported:
                    continue
                for context in doc["contexts"]:
                    for k in range(doc["repeats"]):
                        seed = doc["seed"] + k
                        cells.append(Cell(trial_id_for(t.task_id, setting, agent, model, seed,
                                                       context, decoding),
                                          t.task_id, setting, agent, model, seed, context,
                                          decoding))
    if not cells:
        raise InvalidArgument("spec", "the grid is empty: no selected task supports the "
                                      "selected settings")
    if len(cells) > MAX_CELLS:
        raise InvalidArgument("spec", f"{len(cells)} trials; at most {MAX_CELLS} per campaign")
    return cells


FINISHED = ("completed", "completed_forced_final", "max_turns_reached", "error")
# the campaign's totals: which trial statuses count as which state
STATE_OF = {"completed": "completed", "completed_forced_final": "completed",
            "max_turns_reached": "unsubmitted", "error": "failed", "running": "running",
            "retrying": "running"}  # anything else (pending, interrupted) is pending


def _counts(rows: list[tuple], retries: int) -> agent_pb2.CampaignCounts:
    """Counts and strict means of the tally rows of one slice (or of all)."""
    c = agent_pb2.CampaignCounts(retries=retries)
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for _agent, _model, setting, status, n, s_n, s_v, s_s, _wall in rows:
        c.total += n
        state = STATE_OF.get(status, "pending")
        setattr(c, state, getattr(c, state) + n)
        if status in FINISHED:  # strict: a missing or failed score counts 0
            for name, value in ((("s_n", s_n), ("s_v", s_v)) if setting == "real"
                                else (("s_s", s_s),)):
                sums[name][0] += value
                sums[name][1] += n
    for name, (total, n) in sums.items():
        setattr(c, f"mean_{name}", total / n)
    return c


def summarize(row: CampaignRow, tally: Tally) -> agent_pb2.Campaign:
    """The campaign's progress from the store's aggregate counts (TrialStore.tally)."""
    spec = agent_pb2.CampaignSpec(
        name=row.spec["name"], tasks=row.spec["tasks"], contexts=row.spec["contexts"],
        repeats=row.spec["repeats"], seed=row.spec["seed"],
        concurrency=row.spec["concurrency"], max_attempts=row.spec["max_attempts"],
        backoff_seconds=row.spec["backoff_seconds"],
        agents=[agent_pb2.AgentModel(agent=e[0], model=e[1],
                                     decoding=decoding_pb(e[2] if len(e) > 2 else {}))
                for e in row.spec["agents"]],
        settings=[convert.setting_from_name(s) for s in row.spec["settings"]])
    out = agent_pb2.Campaign(campaign_id=row.campaign_id, spec=spec, state=_STATE[row.state],
                             error=row.error, created=row.created, updated=row.updated,
                             totals=_counts(tally.rows, sum(tally.retries.values())))
    out.retries_by_cause.update(tally.causes)
    slices: dict[tuple[str, str, str], list[tuple]] = defaultdict(list)
    for r in tally.rows:
        slices[r[:3]].append(r)
    # in grid order: the spec's agents, then its settings
    agents = [(e[0], e[1]) for e in row.spec["agents"]]
    for key in sorted(slices, key=lambda k: (agents.index(k[:2]) if k[:2] in agents else 0,
                                             row.spec["settings"].index(k[2])
                                             if k[2] in row.spec["settings"] else 0)):
        s = _counts(slices[key], tally.retries.get(key, 0))
        s.agent, s.model, s.setting = key[0], key[1], convert.setting_from_name(key[2])
        out.slices.append(s)
    t = out.totals
    finished = sum(r[4] for r in tally.rows if r[3] in FINISHED)
    remaining = t.pending + t.running
    if row.state == "running" and finished and remaining:
        per_trial = sum(r[8] for r in tally.rows if r[3] in FINISHED) / finished
        out.eta_seconds = per_trial * remaining / max(1, min(row.spec["concurrency"], remaining))
    out.updated = max(out.updated, time.time() if row.state == "running" else 0.0)
    return out
