"""The model search that the ``experimenter`` and the ``scientist`` share.

Both agents search a *hypothesis space*: the task's published forms and, around
each, a set of edits (a :class:`lawlab.worlds.mechanisms.Variant` each, and the
changes of which parameters are shared across groups on Type II tasks). They
differ only in where the edits come from: the experimenter takes the task's
public catalogue of cited mechanisms, the scientist a generic vocabulary of
corrections and never the catalogue. What they share, here:

- Parallel: three space-filling experiment calls (log-spaced for multi-decade
  inputs, the groups covered), every point sampled as often as the caps allow
  (samples are free within a call; points and calls are the budget).
- Then rounds of analysis and experiment. An analysis (``experimenter/fit.py``
  in the sandbox) fits every candidate law on all data so far and ranks them
  by BIC. Round 0 compares the published forms; later rounds search around the
  current best: one edit added, one removed (stepwise, at most three edits).
  Each analysis also proposes the next experiment: the points where the
  leading candidates disagree most relative to the noise, a third of them
  space-filling, the least observed groups first; the agent runs it. An agent
  may stop spending when its search has settled (:meth:`SearchAgent.settled`);
  the experimenter spends the whole budget.
- The stated criterion, after every analysis and for the final law: the law
  with the fewest edits among those within 6 of the least BIC on all the data
  (a law with more edits needs strong evidence, Kass and Raftery 1995; the
  builder holds every piece of a world to the same standard).
- Type II: experiments concentrate on six groups, so that each has enough
  points for its own parameters and a per-group difference can show.
- Real: the same rounds on the training data, without experiments; the
  leading candidates by BIC and every published form are validated the way
  the task holds out its test data (whole groups calibrated on alternate rows;
  the edge of the input whose held-out range reaches beyond the training
  range; or five random folds, leave-one-out up to 30 rows), and the law with
  the fewest edits within 0.5% of the least validation error is chosen.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lawlab.law.contract import law_module
from lawlab.law.expr import Expression
from lawlab.tasks.library import SolverTask
from lawlab.tasks.specs import SPECS, RefSpec, TaskSpec
from lawlab.worlds import mechanisms
from lawlab.worlds.world import residual_space
from lawlab_agent.builtin.kit import RESULT_PREFIX, design, fallback, script
from lawlab_agent.builtin.sr import SRAgent
from lawlab_agent.policy import PolicyDefaults, TrialContext

ANALYSIS = script("experimenter")  # the model comparison both agents run in the sandbox
SPEC_BY_ID: dict[str, TaskSpec] = {s.task_id: s for s in SPECS}
DESIGN_CALLS = 3
MAX_PIECES = 3
# BIC units a law with more edits must gain: strong evidence (Kass and Raftery
# 1995), the standard each piece of a world meets in the builder's own
# simulated budgets (IDENTIFY_BIC)
BETTER = 6.0
CV_BETTER = 0.005  # Real: the share of validation error a law with more edits must save
VALIDATE_TOP = 8  # Real: the leading candidates by BIC that are validated
DESIGN_GROUPS = 6  # Type II Parallel: the groups experimented on
REAL_ROUNDS = 4  # analyses on the training data in Real: the forms, then three steps
MAX_CANDIDATES = 40  # around one law, per analysis
RIVAL = 10.0  # BIC units: another published form this close is searched around too


@dataclass(frozen=True)
class Hypothesis:
    """A candidate law: a published base and some edits."""

    base: str
    pieces: tuple[str, ...]  # edit keys, in the order they were added
    expr: str
    globals: tuple[str, ...]
    locals: tuple[str, ...]
    init: dict[str, float] = field(default_factory=dict, compare=False, hash=False)

    @property
    def name(self) -> str:
        return " + ".join((self.base, *self.pieces))

    def wire(self) -> dict[str, Any]:
        init = {k: float(v) if math.isfinite(v) else 1.0 for k, v in self.init.items()}
        return {"name": self.name, "expr": self.expr, "globals": list(self.globals),
                "locals": list(self.locals), "init": init}


class Hypotheses:
    """The hypothesis space of one task: its published forms and, around each, the
    edits :meth:`offered` for it (a subclass says which) and, on Type II tasks, the
    changes of sharing."""

    def __init__(self, task: SolverTask, references: Sequence[RefSpec]) -> None:
        self.task = task
        self.multi = task.multi_group
        t = task.target
        self.log_space = residual_space(task.metric, np.array([t.min, t.max])) == "log10"
        self.refs = {r.name: r for r in references}
        self._pieces: dict[str, dict[str, mechanisms.Variant]] = {}

    def offered(self, base: str) -> list[mechanisms.Variant]:
        """The edits of ``base`` this space searches (without sharing changes)."""
        raise NotImplementedError

    def base(self, name: str, start: dict[str, float] | None = None) -> Hypothesis:
        r = self.refs[name]
        return Hypothesis(name, (), r.expr, tuple(r.global_names), tuple(r.local_names),
                          {**r.init, **(start or {})})

    def bases(self) -> list[Hypothesis]:
        return [self.base(n) for n in self.refs]

    def pieces(self, base: str) -> dict[str, mechanisms.Variant]:
        """Every edit of ``base`` (and sharing change), keyed by id."""
        if base not in self._pieces:
            r = self.refs[base]
            offered = self.offered(base)
            if self.multi:
                offered += mechanisms.sharing_variants(r.global_names, r.local_names)
            self._pieces[base] = {v.id: v for v in offered}
        return self._pieces[base]

    def order(self, base: str, keys: list[str]) -> list[str]:
        """The order in which edits of ``base`` are tried (those first that the
        evidence points to); the default keeps the space's own order."""
        return keys

    def compose(self, base: str, keys: tuple[str, ...], start: dict[str, float]) -> Hypothesis:
        r = self.refs[base]
        chosen = [self.pieces(base)[k] for k in keys]
        glob, loc = list(r.global_names), list(r.local_names)
        init = {**r.init, **start}
        for v in chosen:
            if v.shared and v.shared in loc:
                loc.remove(v.shared)
                glob.append(v.shared)
            if v.per_group and v.per_group in glob:
                glob.remove(v.per_group)
                loc.append(v.per_group)
            for c in v.constants:
                (loc if c.local else glob).append(c.name)
                init.setdefault(c.name, c.init)
        return Hypothesis(base, keys, mechanisms.compose(r.expr, chosen), tuple(glob),
                          tuple(loc), init)

    def fits_caps(self, h: Hypothesis) -> bool:
        caps = self.task.caps
        return len(h.globals) <= caps.max_law_constants and \
            (not self.multi or 1 <= len(h.locals) <= caps.max_local_params)

    def neighbours(self, best: Hypothesis, start: dict[str, float]) -> list[Hypothesis]:
        """The current best, with one edit more (if it has fewer than three) and
        with each of its edits removed; incompatible sets are skipped."""
        pieces = self.pieces(best.base)
        out = [self.compose(best.base, best.pieces, start)]
        if len(best.pieces) < MAX_PIECES:
            for key in self.order(best.base, list(pieces)):
                v = pieces[key]
                chosen = [pieces[k] for k in best.pieces] + [v]
                if key not in best.pieces and mechanisms.compatible(chosen) and \
                        not all(q.is_sharing for q in chosen):
                    out.append(self.compose(best.base, (*best.pieces, key), start))
        for i in range(len(best.pieces)):
            rest = best.pieces[:i] + best.pieces[i + 1:]
            out.append(self.compose(best.base, rest, start))
        return [h for h in out if self.fits_caps(h)][:MAX_CANDIDATES]


class SearchAgent(PolicyDefaults):
    """The loop of the module docstring over the space :meth:`hypotheses` builds."""

    name = "search"
    extra_imports = ("pyoperon",)  # for the problems it hands to ``sr``

    def __init__(self) -> None:
        self._experiments = 0
        self._analyses = 0
        self._last = ""  # the last tool this agent used: "experiment" or "analysis"
        self._space: Hypotheses | None = None
        self._asked: dict[str, Hypothesis] = {}
        self._best: Hypothesis | None = None
        self._best_bic = float("inf")
        self._fit: dict[str, Any] = {}
        # the leading law of another published form, if close: searched around too
        self._rival: tuple[Hypothesis, dict[str, Any]] | None = None
        self._next: dict | None = None
        self._delegate: SRAgent | None = None
        self._stalled = False
        self._failed = 0
        self._ranking: dict[str, float] = {}  # the last analysis's BIC by candidate
        self._fits: dict[str, Any] = {}  # the last analysis's fits by candidate

    def hypotheses(self, task: SolverTask, spec: TaskSpec) -> Hypotheses:
        """The hypothesis space of ``task``."""
        raise NotImplementedError

    def settled(self) -> bool:
        """Whether to stop experimenting after this analysis (the default: never,
        the whole budget is spent)."""
        return False

    # ---- the loop ----------------------------------------------------------------

    async def reply(self, ctx: TrialContext, forced: bool) -> str:
        spec = SPEC_BY_ID.get(ctx.task.task_id)
        if spec is None or not spec.references:  # no literature: symbolic regression
            self._delegate = self._delegate or SRAgent()
            return await self._delegate.reply(ctx, forced)
        if self._space is None:
            self._space = self.hypotheses(ctx.task, spec)
        if self._last == "analysis":
            self._read(ctx)
        if forced:
            return self._final(ctx)
        caps = ctx.task.caps
        if not ctx.parallel:
            done = self._analyses >= REAL_ROUNDS or self._stalled or self._failed > 1
            return self._final(ctx) if done else self._analysis(ctx)
        if self._experiments < DESIGN_CALLS:
            payload = design(ctx.task, self._experiments, ctx.seed)
            payload["n_samples"] = caps.max_samples_per_point
            if "group_id" in payload:
                groups = self._groups(ctx)
                payload["group_id"] = [groups[i % len(groups)]
                                       for i in range(len(payload["group_id"]))]
            return self._experiment(payload, "a space-filling design")
        if self._last == "analysis":
            if self.settled():
                return self._final(ctx)
            if self._experiments < caps.max_experiment_calls and self._next:
                return self._experiment(self._next, "where the leading candidate laws "
                                                    "disagree most")
            if self._experiments >= caps.max_experiment_calls or self._failed > 1:
                return self._final(ctx)
        return self._analysis(ctx)

    def _experiment(self, payload: dict, why: str) -> str:
        self._experiments += 1
        self._last = "experiment"
        return f"I will measure {why}.\n<experiment>{json.dumps(payload)}</experiment>"

    def _candidates(self) -> list[Hypothesis]:
        assert self._space is not None
        space = self._space
        if self._best is None:
            return [h for h in space.bases() if space.fits_caps(h)] or space.bases()
        cands = space.neighbours(self._best, self._start(self._fit))
        if self._rival is not None:
            rival, fit = self._rival
            cands += space.neighbours(rival, self._start(fit))[:MAX_CANDIDATES // 2]
        seen = {h.name for h in cands}
        return cands + [h for h in space.bases() if h.name not in seen and space.fits_caps(h)]

    def _analysis(self, ctx: TrialContext) -> str:
        assert self._space is not None
        space = self._space
        cands = self._candidates()
        self._asked = {h.name: h for h in cands}
        self._analyses += 1
        self._last = "analysis"
        task = ctx.task
        plan = None
        if ctx.parallel and self._experiments < task.caps.max_experiment_calls:
            plan = {"points": task.caps.max_points_per_call,
                    "samples": task.caps.max_samples_per_point,
                    "ranges": {v.name: [v.min, v.max] for v in task.inputs},
                    "log_inputs": [v.name for v in task.inputs
                                   if v.min > 0 and v.max / v.min >= 100],
                    "groups": self._groups(ctx) if space.multi else []}
        validate = None if ctx.parallel else self._validation(ctx)
        args = (f"{plan!r}, {space.log_space!r}, seed={ctx.seed % 1000 + self._analyses}, "
                f"validate={validate!r}")
        return (f"{self._why(cands)}\n<python>\n{self._code([h.wire() for h in cands], args)}"
                "\n</python>")

    def _why(self, cands: list[Hypothesis]) -> str:
        """The reasoning written before an analysis."""
        return (f"I will fit {len(cands)} candidate laws on all data so far and rank them by "
                "BIC.")

    def _code(self, cands: list[dict[str, Any]], args: str) -> str:
        """The program of an analysis: the comparison script and its call on the
        candidates (``args``: the rest of its arguments, written out)."""
        return f"{ANALYSIS}\nmain({cands!r}, {args})"

    @staticmethod
    def _groups(ctx: TrialContext) -> list[str]:
        """The groups experimented on: a few, so that each gets enough points for
        its own parameters to be fitted and a per-group difference to show."""
        return list(ctx.task.group_ids)[:DESIGN_GROUPS]

    def _validation(self, ctx: TrialContext) -> dict[str, Any]:
        """How the Real task holds out its test data, as the solver is shown it:
        whole groups (Type II), or the input whose held-out range reaches furthest
        beyond the training range (its edge is validated), else random folds."""
        assert self._space is not None
        always = list(self._space.refs)
        if ctx.task.multi_group:
            return {"kind": "groups", "top": VALIDATE_TOP, "always": always}
        train = {v.name: v for v in ctx.task.inputs}
        reach: list[tuple[float, str, str]] = []
        for h in ctx.heldout:
            v = train.get(h.name)
            if v is None or v.max <= v.min:
                continue
            span = v.max - v.min
            reach += [((h.max - v.max) / span, h.name, "high"), ((v.min - h.min) / span,
                                                                  h.name, "low")]
        far = max(reach, default=(0.0, "", ""))
        if far[0] > 0.05:
            return {"kind": "edge", "input": far[1], "side": far[2], "top": VALIDATE_TOP,
                    "always": always}
        return {"kind": "kfold", "top": VALIDATE_TOP, "always": always}

    @staticmethod
    def _result_lines(ctx: TrialContext, prefix: str = RESULT_PREFIX) -> dict | None:
        """The last ``prefix {...}`` line of the last message, if any."""
        last = ctx.messages[-1]["content"] if ctx.messages else ""
        result = None
        for line in last.splitlines():
            if line.startswith(prefix):
                result = ast.literal_eval(line[len(prefix):])
        return result

    def _read(self, ctx: TrialContext) -> None:
        """The last analysis's ranking: the simplest law (fewest edits) within BETTER
        of the least BIC becomes the current best."""
        result = self._result_lines(ctx)
        if not result or not result.get("ok"):
            self._failed += 1
            self._next = None
            self._fits = {}
            return
        self._fits = dict(result["fits"])
        bic = {r["name"]: r["bic"] for r in result["ranking"] if r["name"] in self._asked}
        cv = {r["name"]: r["cv"] for r in result["ranking"]
              if r["name"] in self._asked and "cv" in r}
        least = min(bic.values())
        sizes = {r["name"]: r["k"] for r in result["ranking"] if r["name"] in self._asked}
        best = self._choose(bic, cv, sizes)
        chosen = self._asked[best]
        self._stalled = self._best is not None and chosen.name == self._best.name
        self._best, self._best_bic = chosen, bic[best]
        self._fit = result["fits"][best]
        self._next = result.get("next")
        rivals = [n for n in sorted(bic, key=lambda n: bic[n])
                  if self._asked[n].base != chosen.base and bic[n] <= least + RIVAL]
        self._rival = (self._asked[rivals[0]], result["fits"][rivals[0]]) if rivals else None
        self._ranking = bic

    def _complexity(self, name: str, sizes: dict[str, int]) -> int:
        """What a simpler law has less of: edits (a law with more edits needs
        strong evidence)."""
        return len(self._asked[name].pieces)

    def _choose(self, bic: dict[str, float], cv: dict[str, float], sizes: dict[str, int]
                ) -> str:
        """The simplest candidate (:meth:`_complexity`) within BETTER of the least BIC,
        or in Real within CV_BETTER of the least validation error; ties to the lower."""
        if cv:  # Real: validation error; a more complex law must lower it by CV_BETTER
            low = min(cv.values())
            return min((n for n in cv if cv[n] <= low * (1 + CV_BETTER)),
                       key=lambda n: (self._complexity(n, sizes), cv[n]))
        least = min(bic.values())
        return min((n for n in bic if bic[n] <= least + BETTER),
                   key=lambda n: (self._complexity(n, sizes), bic[n]))

    @staticmethod
    def _start(fit: dict[str, Any]) -> dict[str, float]:
        return {**fit.get("constants", {}), **fit.get("local", {})}

    def _final(self, ctx: TrialContext) -> str:
        if self._best is None or not self._fit:
            return fallback(ctx)
        assert self._space is not None
        h, multi = self._best, self._space.multi
        names = Expression(h.expr).names
        used = [v.name for v in ctx.task.inputs if v.name in names] or [ctx.task.inputs[0].name]
        constants = {n: self._fit["constants"][n] for n in h.globals}
        local = {n: self._fit["local"].get(n, h.init.get(n, 1.0)) for n in h.locals} \
            if multi else None
        module = law_module(title=f"{self.name}: {h.name} (BIC {self._best_bic:.2f})",
                            expr=h.expr, used_inputs=used, constants=constants,
                            local_init=local, space="log10" if self._space.log_space else "linear")
        return (f"The simplest law within {BETTER:g} of the least BIC is {h.name}.\n"
                f"<final_formula>\n{module}</final_formula>")
