"""Campaign grids: expansion into trial cells, progress summaries (the spec's
request checks and the protos are wire.py's).

A campaign is agents/models x tasks x settings x contexts x repeats. Its id
is its name, or a hash of the normalised grid, so submitting the same grid
twice names the same campaign (and resumes it). Trial ids derive from the
cell alone, so two campaigns that share a cell share its trial.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from lawlab.rpc.errors import InvalidArgument, NotFound
from lawlab.tasks.library import SolverTask
from lawlab.trialid import decoding_json, trial_id_for
from lawlab.vocab import CampaignState, Setting, TrialStatus, coerce
from lawlab_agent.store import CampaignRow, Cell, Tally

MAX_CELLS = 100_000


def select_tasks(selectors: list[str], tasks: list[SolverTask]) -> list[SolverTask]:
    """Task ids and selectors (all, suite:NAME, type:I|II, discipline:NAME), matched
    without regard to case; a selector that matches nothing lists the valid values."""
    import difflib

    by_id = {t.task_id.lower(): t for t in tasks}
    suites = sorted({t.suite for t in tasks})
    disciplines = sorted({t.discipline for t in tasks})
    chosen: dict[str, SolverTask] = {}
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
            found = [t for t in tasks if t.multi_group == multi]
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


@dataclass(frozen=True)
class Dropped:
    """A requested (task, setting, agent, model) that will not run, and why."""

    task_id: str
    setting: Setting
    agent: str
    model: str
    reason: str

    def __post_init__(self) -> None:
        coerce(self)


def _why_not(setting: str, task: SolverTask) -> str:
    if setting == Setting.PARALLEL and task.suite != "real":
        return f"the {task.suite} suite has no Parallel setting (only real-data tasks have worlds)"
    if setting == Setting.PARALLEL:
        return "no Parallel world under this library's world key (`lawlab tasks list`)"
    return f"the task has no {setting} setting (it offers {', '.join(sorted(task.settings))})"


def expand(doc: dict, tasks: list[SolverTask],
           dropped: list[Dropped] | None = None) -> list[Cell]:
    """Every cell of the grid; a task is paired only with settings it supports (the
    pairs left out go to ``dropped`` with their reason when it is given)."""
    cells = []
    chosen = select_tasks(doc["tasks"], tasks)
    for entry in doc["agents"]:
        agent, model = entry[0], entry[1]
        decoding = decoding_json(entry[2] if len(entry) > 2 else {})
        for setting in doc["settings"]:
            for t in chosen:
                supported = set(t.settings) or {Setting.REAL}
                if setting not in supported:
                    if dropped is not None:
                        dropped.append(Dropped(t.task_id, setting, agent, model,
                                               _why_not(setting, t)))
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


def unknown_campaign(store: Any, campaign_id: str) -> NotFound:
    """NotFound for a campaign id, with the nearest stored ids (a typo says what was
    meant) or how to list them."""
    import difflib

    ids = [c.campaign_id for c in store.campaigns.all()]
    near = difflib.get_close_matches(campaign_id, ids, n=3, cutoff=0.6)
    hint = (f"; did you mean {', '.join(repr(n) for n in near)}?" if near
            else f"; {len(ids)} campaign(s) stored (`lawlab campaign list`)")
    return NotFound(f"campaign {campaign_id!r} not found{hint}")


FINISHED = ("completed", "completed_forced_final", "max_turns_reached", "error")
# the campaign's totals: which trial statuses count as which state
STATE_OF = {"completed": "completed", "completed_forced_final": "completed",
            "max_turns_reached": "unsubmitted", "error": "failed", "running": "running"}
# anything else is pending: never started, interrupted, or retrying (waiting out its
# backoff, no attempt running: "running" never exceeds the campaign's concurrency)


@dataclass
class Counts:
    """Trials of a campaign (or of one agent x setting slice) by state, and the
    strict means of their scores over the trials the protocol scores (a missing
    score, an unsubmitted trial or an unusable formula counts 0; a trial given up
    after an infrastructure error is no score: ``failed`` counts it, no mean
    does)."""

    total: int = 0
    completed: int = 0
    unsubmitted: int = 0
    failed: int = 0
    running: int = 0
    pending: int = 0
    retries: int = 0
    means: dict[str, float] = field(default_factory=dict)  # s_n, s_v, s_s

    @property
    def done(self) -> int:
        return self.completed + self.unsubmitted + self.failed


@dataclass
class Summary:
    """A campaign's progress, from the store's aggregate counts (CampaignRepository.tally)."""

    row: CampaignRow
    totals: Counts
    slices: list[tuple[str, str, str, Counts]]  # (agent, model, setting, counts), grid order
    causes: dict[str, int]  # retries by cause
    eta_seconds: float
    updated: float


def counts(rows: list[tuple], retries: int) -> Counts:
    c = Counts(retries=retries)
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for _agent, _model, setting, status, n, s_n, s_v, s_s, _wall in rows:
        c.total += n
        state = STATE_OF.get(status, "pending")
        setattr(c, state, getattr(c, state) + n)
        if status in FINISHED and status != TrialStatus.ERROR:
            for name, value in ((("s_n", s_n), ("s_v", s_v)) if setting == Setting.REAL
                                else (("s_s", s_s),)):
                sums[name][0] += value
                sums[name][1] += n
    c.means = {name: total / n for name, (total, n) in sums.items()}
    return c


def summarize(row: CampaignRow, tally: Tally) -> Summary:
    slices: dict[tuple[str, str, str], list[tuple]] = defaultdict(list)
    for r in tally.rows:
        slices[r[:3]].append(r)
    # in grid order: the spec's agents, then its settings
    agents = [(e[0], e[1]) for e in row.spec["agents"]]
    order = sorted(slices, key=lambda k: (agents.index(k[:2]) if k[:2] in agents else 0,
                                          row.spec["settings"].index(k[2])
                                          if k[2] in row.spec["settings"] else 0))
    totals = counts(tally.rows, sum(tally.retries.values()))
    finished = sum(r[4] for r in tally.rows if r[3] in FINISHED)
    remaining = totals.pending + totals.running
    eta = 0.0
    if row.state == CampaignState.RUNNING and finished and remaining:
        per_trial = sum(r[8] for r in tally.rows if r[3] in FINISHED) / finished
        eta = per_trial * remaining / max(1, min(row.spec["concurrency"], remaining))
    return Summary(row, totals,
                   [(*k, counts(slices[k], tally.retries.get(k, 0))) for k in order],
                   dict(tally.causes), eta,
                   max(row.updated, time.time() if row.state == CampaignState.RUNNING else 0.0))
