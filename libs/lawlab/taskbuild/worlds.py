"""Builds one task's Parallel world (PROTOCOL.md section 5, paper Appendix A).

Construction data are all records of the Real splits pooled (A.1); groups with
fewer than 8 rows are dropped (A.2). The base is the non-degenerate published
reference with the least systematic residual structure B_b among those with
non-negative residual-space R^2 (A.1). The hidden law comes from
:mod:`lawlab.taskbuild.synthesis` under the operator's world key. Residuals of
the hidden law are debiased by a local mean (A.3); the noise is the smoothed
local bootstrap of :mod:`lawlab.world`; the calibration factor s per group is
computed from the variance of those very draws, at the group's records and on a
grid spanning its support (single input: log-spaced over more than a decade),
the smaller of the two (A.4), so that the world's *sampled* residual-space R^2
is at least 0.9 wherever it is measured.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lawlab import structure, validity
from lawlab import world as world_mod
from lawlab.expr import Expression
from lawlab.fitting import FitError, FitResult, fit_expression, fit_grouped, to_residual_space
from lawlab.taskbuild import synthesis
from lawlab.tasks import GROUP_COL
from lawlab.worldkey import WorldKey

log = logging.getLogger("lawlab.taskbuild")

MIN_GROUP_ROWS = 8
JUDGE_GROUPS = 4          # groups the structure judge and the integrity screen probe
PROBES_PER_GROUP = 80
PROBE_SALT = 7
CALIBRATION_POINTS = 200
CALIBRATION_DRAWS = 20
# a piece stands out from the best law without it by >= EFFECT_MIN residual SDs of
# the real data (on points spanning the support); the key sets its magnitude in
# [TARGET_MIN, TARGET_MAX]; whether a solver can see it within the budget is the
# identifiability screen's question
EFFECT_MIN = 0.25
TARGET_MIN, TARGET_MAX = 0.4, 1.0
JITTER = (0.03, 0.15)     # when the data pin a piece: its departure scaled by 1 +- this
DEGENERATE_SE = 1.0       # ... with standard errors beyond their values
DEGENERATE_CORR = 0.999   # two constants this correlated are identified only together
DRIFT = 5.0               # a published constant stays within this factor of its base fit
DEGENERATE_GAP = 0.05     # a reference this close to a simpler one (residual SDs) reduces to it
# "fits the real data at least about as well" (an eligibility test only): a
# residual SD at most 10% above the base's, 5% more for each further piece
ADEQUACY_RATIO = 1.10
ADEQUACY_PER_PIECE = 0.05
IDENTIFY_REPS = 3
IDENTIFY_BIC = 6.0        # strong evidence for every piece, in 2 of 3 simulated budgets


class NoWorld(Exception):
    """No admissible world: the task has no Parallel setting (the reason says why;
    ``record`` holds what was screened)."""

    def __init__(self, reason: str, record: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.record = record or {}


@dataclass
class Reference:
    name: str
    expr: str
    global_names: list[str]
    local_names: list[str]
    init: dict[str, float]


@dataclass
class BuiltWorld:
    spec: dict[str, Any]
    arrays: dict[str, np.ndarray]
    record: dict[str, Any]      # the synthesis record (eval/synthesis.json)
    world: world_mod.World
    frame: pd.DataFrame         # the construction records (pooled, small groups dropped)


@dataclass
class Fitted:
    constants: dict[str, float]
    local: dict[str, dict[str, float]]
    r2: float
    rss: float
    stderr: dict[str, float] = field(default_factory=dict)
    ridge: tuple[float, str, str] = (0.0, "", "")


class WorldBuilder:
    def __init__(self, task_id: str, pooled: pd.DataFrame, target: str,
                 inputs: Sequence[Mapping[str, Any]], metric: str, multi_group: bool,
                 rubric: Sequence[dict[str, Any]], caps: Mapping[str, float],
                 key: WorldKey) -> None:
        self.task_id = task_id
        self.target = target
        self.inputs = [str(v["name"]) for v in inputs]
        self.units = {str(v["name"]): str(v.get("unit", "")) for v in inputs}
        self.multi = multi_group
        self.rubric = list(rubric)
        self.caps = dict(caps)
        self.key = key
        frame = pooled.reset_index(drop=True)
        if multi_group:
            sizes = frame.groupby(GROUP_COL).size()
            keep = sizes[sizes >= MIN_GROUP_ROWS].index
            frame = frame[frame[GROUP_COL].isin(keep)].reset_index(drop=True)
            frame[GROUP_COL] = frame[GROUP_COL].astype(str)
        self.frame = frame
        self.y = frame[target].to_numpy(float)
        self.space = world_mod.residual_space(metric, self.y)
        self.y_t = to_residual_space(self.y, self.space)
        self.data = {n: frame[n].to_numpy(float) for n in self.inputs}
        self.groups = (frame[GROUP_COL].to_numpy(str) if multi_group
                       else np.full(len(frame), world_mod.GLOBAL_GROUP))
        self.group_labels = sorted(set(self.groups))
        self.coords = world_mod.Coordinates.fit(self.data, self.inputs)
        self.x = self.coords.transform(self.data)
        self.rng = np.random.default_rng(key.seed("synthesis", task_id))
        self.base_fit: Fitted | None = None
        self.ref_fits: dict[str, Fitted] = {}
        # the judge's and the integrity screen's probes: a few groups spread over the list
        picks = (self.group_labels if len(self.group_labels) <= JUDGE_GROUPS else
                 [self.group_labels[round(i * (len(self.group_labels) - 1) / (JUDGE_GROUPS - 1))]
                  for i in range(JUDGE_GROUPS)])
        self.probe_groups = list(dict.fromkeys(picks))
        self.probes = {g: self._probe_points(g, PROBES_PER_GROUP, PROBE_SALT)
                       for g in self.probe_groups}

    # ---- fitting ------------------------------------------------------------------
    def fit(self, expr: str, global_names: Sequence[str], local_names: Sequence[str],
            init: Mapping[str, float], fixed: Mapping[str, float] | None = None,
            n_starts: int = 4, max_nfev: int = 1500,
            fixed_local: Mapping[str, Mapping[str, float]] | None = None) -> Fitted:
        """Least squares on the pooled records; ``fixed`` constants and ``fixed_local``
        per-group tables are held at their values (the tables enter row by row)."""
        e = Expression(expr)
        data: dict[str, Any] = dict(self.data)
        data.update({k: np.float64(v) for k, v in (fixed or {}).items()})
        for name, table in (fixed_local or {}).items():
            data[name] = np.array([table[g] for g in self.groups], float)
        local_names = [n for n in local_names if n not in (fixed_local or {})]
        if self.multi and local_names:
            res: FitResult = fit_grouped(e, data, self.y, self.groups, list(global_names),
                                         list(local_names), dict(init), space=self.space,
                                         n_starts=n_starts, max_nfev=max_nfev)
        else:
            res = fit_expression(e, data, self.y, [*global_names, *local_names], dict(init),
                                 space=self.space, n_starts=n_starts, max_nfev=max_nfev)
            if local_names:  # one group: a local constant is one value for it
                res.local = {n: {self.group_labels[0]: res.constants.pop(n)}
                             for n in local_names}
        constants = dict(res.constants)
        constants.update(fixed or {})
        local = dict(res.local)
        local.update({n: dict(t) for n, t in (fixed_local or {}).items()})
        return Fitted(constants, local, res.r2, res.rss, res.stderr, res.ridge)

    def predict(self, expr: str, constants: Mapping[str, float],
                local: Mapping[str, Mapping[str, float]], frame: pd.DataFrame | None = None
                ) -> np.ndarray:
        frame = self.frame if frame is None else frame
        env: dict[str, Any] = {n: frame[n].to_numpy(float) for n in self.inputs}
        env.update(constants)
        groups = (frame[GROUP_COL].astype(str).to_numpy() if self.multi
                  else np.full(len(frame), world_mod.GLOBAL_GROUP))
        for name, table in local.items():
            env[name] = np.array([table[g] for g in groups])
        with np.errstate(all="ignore"):
            return np.broadcast_to(np.asarray(Expression(expr).evaluate(env), float),
                                   (len(frame),)).copy()

    def residual_sd(self, fitted: Fitted) -> float:
        return math.sqrt(fitted.rss / max(1, len(self.y)))

    # ---- probes ---------------------------------------------------------------------
    def _rows(self, group: str) -> pd.DataFrame:
        return self.frame if not self.multi else self.frame[self.frame[GROUP_COL] == group]

    def support(self, group: str) -> dict[str, list[float]]:
        rows = self._rows(group)
        return {n: [float(rows[n].min()), float(rows[n].max())] for n in self.inputs}

    def _probe_points(self, group: str, n: int, salt: int) -> dict[str, np.ndarray]:
        """Points spanning a group's support (log-spaced for multi-decade inputs);
        inputs constant within a group stay at the group's value."""
        return world_mod.probe_points(self.support(group), self.coords.log_inputs, n, salt)

    def hidden(self, expr: str, constants: Mapping[str, float],
               local: Mapping[str, Mapping[str, float]], pieces: Sequence[structure.Piece]
               ) -> structure.HiddenLaw:
        local_names = list(local)
        shared = {k: v for k, v in constants.items() if k not in local_names}
        return structure.HiddenLaw(
            Expression(expr), dict(shared),
            {n: {g: float(t[g]) for g in self.probe_groups} for n, t in local.items()},
            list(pieces), self.inputs, self.space,
            {("" if not self.multi else g): self.probes[g] for g in self.probe_groups})

    # ---- the base ---------------------------------------------------------------------
    def structure_ratio(self, residuals: np.ndarray) -> float:
        """B_b; for Type II the median over (at most 40) groups."""
        labels = self.group_labels[:40]
        values = [world_mod.structure_ratio(self.x[self.groups == g], residuals[self.groups == g])
                  for g in labels]
        return float(np.median(values))

    def degenerate(self, fitted: Fitted, names: Sequence[str]) -> str:
        """Why a fit is degenerate ('' if it is not): two constants the data
        identify only in combination (a ridge: |correlation| near 1), both
        undetermined (standard errors beyond their values). A lone constant near
        zero (an unneeded term) is not degeneracy."""
        corr, a, b = fitted.ridge
        if corr < DEGENERATE_CORR or a not in names or b not in names:
            return ""
        loose = []
        for n in (a, b):
            value, se = fitted.constants.get(n), fitted.stderr.get(n)
            if value is not None and se is not None and np.isfinite(se) and abs(value) > 0 \
                    and se / abs(value) > DEGENERATE_SE:
                loose.append(f"{n} = {value:.4g} (SE {se:.3g})")
        if len(loose) < 2:
            return ""
        return (f"only a combination of {a} and {b} is identified (correlation {corr:.5f}): "
                + ", ".join(loose))

    @staticmethod
    def drifted(cand: synthesis.Candidate, base_fit: Fitted, names: Sequence[str]) -> str:
        """The published constants keep their meaning: none changes sign or moves by
        more than a factor of DRIFT from its value in the base's own fit."""
        for n in names:
            old, new = base_fit.constants.get(n), cand.constants.get(n)
            se = base_fit.stderr.get(n, float("nan"))
            if old is None or new is None or old == 0:
                continue
            if np.isfinite(se) and abs(old) < 3 * se:
                continue  # not significantly non-zero in the base's fit: no meaning to keep
            ratio = new / old
            if ratio <= 0 or not 1 / DRIFT <= ratio <= DRIFT:
                return (f"the published constant {n} moved from {old:.4g} to {new:.4g}: the "
                        "variant no longer reads as the published law")
        return ""

    def reference_gap(self, ref: Reference, fitted: Fitted, simpler: Reference,
                      simpler_fit: Fitted) -> float:
        """How far ``ref`` at its fit is from the best ``simpler`` law, on probes
        spanning each group's support, in residual SDs of ``ref``'s fit."""
        hidden = self.hidden(ref.expr, fitted.constants, fitted.local, [])
        data = [hidden.probes[g] for g in hidden.groups]
        curves = hidden.evaluate(hidden.values())
        if not structure._finite(curves):
            return float("inf")
        consts = {**simpler.init, **simpler_fit.constants,
                  **{n: float(np.median(list(t.values())))
                     for n, t in simpler_fit.local.items()}}
        form = structure.form_from_expression(Expression(simpler.expr), consts, self.inputs,
                                              simpler.local_names)
        value, _ = structure.grouped_misfit(form, data, curves, self.space, starts=3)
        spread = float(np.std(np.concatenate([to_residual_space(c, self.space) for c in curves])))
        return float(value * spread / max(self.residual_sd(fitted), 1e-300))

    def select_base(self, refs: Sequence[Reference]) -> tuple[Reference, Fitted, dict[str, Any]]:
        scores: dict[str, Any] = {}
        fits: dict[str, Fitted] = {}
        for ref in refs:
            try:
                fitted = self.fit(ref.expr, ref.global_names, ref.local_names, ref.init,
                                  n_starts=8)
            except FitError as err:
                scores[ref.name] = {"fit": f"failed: {err}"}
                continue
            fits[ref.name] = fitted
            resid = self.y_t - to_residual_space(
                self.predict(ref.expr, fitted.constants, fitted.local), self.space)
            scores[ref.name] = {"r2_residual_space": fitted.r2,
                                "structure_B_b": self.structure_ratio(resid),
                                "degenerate": self.degenerate(fitted, ref.global_names)}
        # a reference whose fit is another, simpler reference in disguise (a rate
        # constant fitted to ~0 turns von Bertalanffy growth into a straight line)
        for ref in refs:
            if ref.name not in fits or scores[ref.name]["degenerate"]:
                continue
            size = len(ref.global_names) + len(ref.local_names)
            for other in refs:
                if other.name == ref.name or other.name not in fits or \
                        len(other.global_names) + len(other.local_names) >= size:
                    continue
                gap = self.reference_gap(ref, fits[ref.name], other, fits[other.name])
                if gap < DEGENERATE_GAP:
                    scores[ref.name]["degenerate"] = (
                        f"reduces to the simpler reference {other.name} on these records (they "
                        f"differ by {gap:.3f} residual SD)")
                    break
        usable = [r for r in refs if r.name in fits and not scores[r.name]["degenerate"]]
        eligible = [r for r in usable if scores[r.name]["r2_residual_space"] >= 0] or usable
        if not eligible:
            raise NoWorld("every published reference is degenerate on the pooled records: "
                          + "; ".join(f"{k}: {v.get('degenerate') or v.get('fit')}"
                                      for k, v in scores.items()))
        base = min(eligible, key=lambda r: scores[r.name]["structure_B_b"])
        self.base_fit = fits[base.name]
        self.ref_fits = fits
        return base, fits[base.name], scores

    # ---- screens ------------------------------------------------------------------------
    def rubric_failure(self, expr: str, constants: Mapping[str, float],
                       local: Mapping[str, Mapping[str, float]]) -> str:
        """The first rubric item the law fails on some group (every group probed,
        the same plan as the judge's), or ''."""
        predictor = validity.expression_predictor(
            expr, constants, self.inputs, {n: {str(g): v for g, v in t.items()}
                                           for n, t in local.items()})
        verdicts = validity.evaluate(self.rubric, self.frame, self.inputs, self.multi, predictor)
        bad = validity.failures(verdicts)
        return bad[0] if bad else ""

    def reduced_form(self, cand: synthesis.Candidate, piece: synthesis.Piece,
                     anchor: Fitted | None = None) -> tuple[structure.Form, list[np.ndarray]]:
        """The law without ``piece`` as a form to refit (its neutral constants
        frozen, a per-group parameter made shared), with starting values per
        probed group: the law's own values, or those of ``anchor`` (the base's
        fit) where it has them."""
        names = [n for n in cand.global_names if n not in piece.neutral]
        locals_ = list(cand.local_names)
        values = {**{n: cand.constants[n] for n in names}, **piece.neutral}
        if piece.per_group:
            locals_.remove(piece.per_group)
            names.append(piece.per_group)
            values[piece.per_group] = float(np.median(list(cand.local[piece.per_group].values())))
        if piece.shared:  # the reduced law lets the parameter vary per group again
            names.remove(piece.shared)
            locals_.append(piece.shared)
        order = [*names, *piece.neutral, *locals_]
        consts = {n: values.get(n, cand.constants.get(n, 1.0)) for n in [*names, *piece.neutral]}
        for n in locals_:
            table = cand.local.get(n)
            consts[n] = (float(np.median(list(table.values()))) if table else
                         float(cand.constants[n]))
        form = structure.form_from_expression(Expression(cand.expr), consts, self.inputs, locals_)
        form = _freeze(form, order, set(piece.neutral))
        starts = []
        for g in self.probe_groups:
            v = {n: consts[n] for n in order if n not in piece.neutral}
            for n in locals_:
                table = cand.local.get(n)
                if table:
                    v[n] = float(table[g])
            if anchor is not None:
                for n in v:
                    if n in anchor.local and g in anchor.local[n]:
                        v[n] = float(anchor.local[n][g])
                    elif n in anchor.constants:
                        v[n] = float(anchor.constants[n])
            starts.append(np.array(list(v.values())))
        return form, starts

    def distinguishability(self, cand: synthesis.Candidate, resid_sd: float) -> list[float]:
        """For each piece, how far the law is from the best law without it, on the
        probes spanning each group's support, in residual SDs of the real data."""
        hidden = self.hidden(cand.expr, cand.constants, cand.local, [])
        data = [hidden.probes[g] for g in hidden.groups]
        curves = hidden.evaluate(hidden.values())
        if not structure._finite(curves):
            return [0.0] * len(cand.pieces)
        spread = float(np.std(np.concatenate([to_residual_space(c, self.space) for c in curves])))
        out = []
        for p in cand.pieces:
            if p.shared:
                out.append(0.0)
                continue
            # from the law's own values, and from the base's fit: a piece that only
            # moves another constant (an input shift against a midpoint) is found
            # absorbed even when that constant had to travel far
            value = float("inf")
            for anchor in (None, self.base_fit):
                form, starts = self.reduced_form(cand, p, anchor)
                v, _ = structure.grouped_misfit(form, data, curves, self.space, starts=1,
                                                init=starts, max_nfev=300)
                value = min(value, v)
            out.append(float(value * spread / max(resid_sd, 1e-300)))
        return out

    def shape(self, cand: synthesis.Candidate, targets: Sequence[float], resid_sd: float
              ) -> tuple[list[float], Fitted | None]:
        """Set each piece's departure from neutral so that it stands out from the
        rest of the law by its keyed target (in residual SDs), refitting the other
        constants to the real records each time. Returns the final distinguishability
        and the last refit (None when no keyed shape could be applied).

        The first round always applies a keyed change, even when the fit to the data
        already stands near the targets: a piece left where the data put it would be
        the same under every key (issue #15: two keys drawing one piece coincided).
        When the rest of the law cannot follow the targets (the data pin the piece),
        the piece's departure is instead scaled by a keyed factor of 3-15% either way
        (JITTER). A per-group piece keeps its median and has its spread about it
        scaled the same way."""
        effects = self.distinguishability(cand, resid_sd)
        last: Fitted | None = None
        for round_no in range(8):
            factors = [float(np.clip(t / e, 0.25, 4.0)) if e > 1e-9 else 1.0
                       for t, e in zip(targets, effects)]
            fixed, fixed_local = self._departures(cand, factors, effects)
            moved = round_no == 0 or any(abs(f - 1.0) > 0.1 for f in factors)
            if not moved:
                break
            refit = self._follow(cand, fixed, fixed_local)
            if refit is None and round_no == 0:
                jitter = [self._jitter(p) for p in cand.pieces]
                fixed, fixed_local = self._departures(cand, jitter, effects)
                refit = self._follow(cand, fixed, fixed_local)
                if refit is not None:
                    cand.constants, cand.local = refit.constants, refit.local
                    cand.r2, cand.rss = refit.r2, refit.rss
                    return self.distinguishability(cand, resid_sd), refit
            if refit is None:
                break  # the rest of the law cannot follow: keep the last good shape
            cand.constants, cand.local, cand.r2 = refit.constants, refit.local, refit.r2
            cand.rss = refit.rss
            last = refit
            effects = self.distinguishability(cand, resid_sd)
        return effects, last

    def _jitter(self, piece: synthesis.Piece) -> float:
        u = self.key.uniform("jitter", self.task_id, piece.description)
        side = 1.0 if self.key.uniform("sign", self.task_id, piece.description) < 0.5 else -1.0
        return 1.0 + side * (JITTER[0] + (JITTER[1] - JITTER[0]) * u)

    def _departures(self, cand: synthesis.Candidate, factors: Sequence[float],
                    effects: Sequence[float]
                    ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
        """Each piece's constants moved from neutral by its factor (a piece at its
        neutral value starts from a keyed small departure)."""
        fixed: dict[str, float] = {}
        fixed_local: dict[str, dict[str, float]] = {}
        for p, factor, effect in zip(cand.pieces, factors, effects):
            if p.per_group and p.per_group in cand.local:
                table = cand.local[p.per_group]
                mid = float(np.median(list(table.values())))
                fixed_local[p.per_group] = {g: mid + (v - mid) * factor for g, v in table.items()}
            for name in p.constants:
                if name in p.fixed:
                    continue
                neutral = p.neutral.get(name, 0.0)
                dev = cand.constants[name] - neutral
                f = factor
                if effect <= 1e-9 or abs(dev) < 1e-12 * max(1.0, abs(neutral)):
                    dev = (1.0 if self.key.uniform("sign", self.task_id, p.description) < 0.5
                           else -1.0) * p.unit
                    f = 1.0
                fixed[name] = neutral + dev * f
        return fixed, fixed_local

    def _follow(self, cand: synthesis.Candidate, fixed: Mapping[str, float],
                fixed_local: Mapping[str, Mapping[str, float]]) -> Fitted | None:
        """The rest of the law refitted around the pieces' new values, or held where it
        stands (a one-start refit from medians can land in a worse basin), whichever
        fits better; None when neither stays within 4x the candidate's RSS."""
        free = [n for n in cand.global_names if n not in fixed]
        start = {n: cand.constants[n] for n in free}
        start.update({n: float(np.median(list(t.values()))) for n, t in cand.local.items()
                      if n not in fixed_local})
        options = [self.held(cand, fixed, fixed_local)]
        try:
            options.append(self.fit(cand.expr, free, cand.local_names, start, fixed=fixed,
                                    n_starts=1, fixed_local=fixed_local))
        except FitError:
            pass
        finite = [o for o in options if o is not None and np.isfinite(o.rss)]
        if not finite:
            return None
        best = min(finite, key=lambda o: o.rss)
        return best if best.rss <= 4 * cand.rss else None

    def held(self, cand: synthesis.Candidate, fixed: Mapping[str, float],
             fixed_local: Mapping[str, Mapping[str, float]]) -> Fitted | None:
        """The candidate with ``fixed`` and ``fixed_local`` applied and every other
        constant held at its current value (no refit)."""
        constants = {**cand.constants, **fixed}
        local = {**{n: dict(t) for n, t in cand.local.items()},
                 **{n: dict(t) for n, t in fixed_local.items()}}
        pred = self.predict(cand.expr, constants, local)
        r = to_residual_space(pred, self.space) - self.y_t
        if not np.all(np.isfinite(r)):
            return None
        rss = float(np.sum(r ** 2))
        tss = float(np.sum((self.y_t - self.y_t.mean()) ** 2))
        return Fitted(constants, local, 1 - rss / tss if tss > 0 else float("nan"), rss)

    def integrity_failure(self, cand: synthesis.Candidate, refs: Sequence[Reference]) -> str:
        """The structure judge's own equivalence test: no published reference
        reproduces the variant."""
        hidden = self.hidden(cand.expr, cand.constants, cand.local, [])
        data = [hidden.probes[g] for g in hidden.groups]
        curves = hidden.evaluate(hidden.values())
        if not structure._finite(curves):
            return "the variant is not finite on its support"
        for ref in refs:
            fitted = self.ref_fits.get(ref.name)
            consts = {**ref.init, **{n: 1.0 for n in ref.local_names if n not in ref.init}}
            if fitted is not None:
                consts.update(fitted.constants)
                consts.update({n: float(np.median(list(t.values())))
                               for n, t in fitted.local.items()})
            for start in (consts, {n: cand.constants.get(n, v) for n, v in consts.items()}):
                form = structure.form_from_expression(Expression(ref.expr), start, self.inputs,
                                                      ref.local_names)
                if structure.grouped_misfit(form, data, curves, self.space)[0] \
                        < structure.MATCH_TOL:
                    return f"refit-equivalent to the published reference {ref.name}"
        return ""

    # ---- candidates -------------------------------------------------------------------------
    def evaluate_candidate(self, cand: synthesis.Candidate, start: Mapping[str, float],
                           base_fit: Fitted, refs: Sequence[Reference], salt: str) -> None:
        """Fit, shape to keyed magnitudes, and screen one candidate."""
        init = dict(start)
        for p in cand.pieces:
            init.update(p.constants)
        # one start, from the base's own fit: the variant stays near the published law
        # (a random start can find a degenerate basin that fits a little better)
        free = self.fit(cand.expr, cand.global_names, cand.local_names, init, n_starts=1)
        cand.constants, cand.local, cand.r2, cand.rss = free.constants, free.local, free.r2, free.rss
        cand.screen["execution"] = "pass"
        resid_sd = self.residual_sd(base_fit)
        # a piece's magnitude is keyed by the piece alone: alone or combined, it aims
        # at the same departure from the rest of the law
        targets = [math.exp(self.key.uniform("magnitude", self.task_id, p.description)
                            * math.log(TARGET_MAX / TARGET_MIN)) * TARGET_MIN
                   for p in cand.pieces]
        limit = ADEQUACY_RATIO + ADEQUACY_PER_PIECE * (len(cand.pieces) - 1)

        def adequate() -> bool:
            return math.sqrt(cand.rss / max(base_fit.rss, 1e-300)) <= limit

        final: Fitted = free
        keyed = False
        for _ in range(4):  # smaller magnitudes until the variant fits and obeys the rubric
            cand.effects, last = self.shape(cand, targets, resid_sd)
            final = last or final
            keyed = keyed or last is not None
            if adequate() and not self.rubric_failure(cand.expr, cand.constants, cand.local):
                break
            targets = [max(EFFECT_MIN, t * 0.7) for t in targets]
        pred = self.predict(cand.expr, cand.constants, cand.local)
        if not np.all(np.isfinite(pred)):
            cand.screen["execution"] = "fail: non-finite predictions on the records"
            return
        ratio = math.sqrt(cand.rss / max(base_fit.rss, 1e-300))
        cand.screen["adequacy"] = (
            "pass" if adequate() else
            f"fail: residual SD {ratio:.3f} x the base's (at most {limit:.2f}); R^2 "
            f"{cand.r2:.4f} vs {base_fit.r2:.4f}")
        weak = [f"{p.description} ({e:.2f} SD)" for p, e in zip(cand.pieces, cand.effects)
                if e < EFFECT_MIN and not p.shared]
        cand.screen["effect"] = (
            "fail: the keyed magnitude could not be applied (the rest of the law cannot "
            "follow it), so the variant would stand where the data put it under any key"
            if not keyed and not all(p.shared for p in cand.pieces) else
            "pass" if not weak else f"fail: absorbed by the rest: {weak}")
        why = self.rubric_failure(cand.expr, cand.constants, cand.local)
        cand.screen["rubric"] = "pass" if not why else f"fail: {why}"
        base_names = [n for n in cand.global_names if not any(n in p.constants for p in cand.pieces)]
        degenerate = self.degenerate(final, base_names) or self.drifted(cand, base_fit, base_names)
        cand.screen["non_degenerate"] = "pass" if not degenerate else f"fail: {degenerate}"
        if cand.admissible:
            # a sharing restriction alone is a special case of its base by design; it
            # enters worlds only beside pieces that add structure
            only_sharing = all(p.shared for p in cand.pieces)
            why = "" if only_sharing else self.integrity_failure(cand, refs)
            cand.screen["integrity"] = "pass" if not why else f"fail: {why}"

    # ---- the world ----------------------------------------------------------------------
    def make_world(self, expr: str, constants: Mapping[str, float],
                   local: Mapping[str, Mapping[str, float]]
                   ) -> tuple[dict[str, Any], dict[str, np.ndarray], world_mod.World]:
        f_t = to_residual_space(self.predict(expr, constants, local), self.space)
        resid = self.y_t - f_t
        debiased = np.empty_like(resid)
        for g in self.group_labels:
            m = self.groups == g
            debiased[m] = resid[m] - world_mod.local_mean(
                self.x[m], resid[m], world_mod.DEBIAS_FRACTION, world_mod.DEBIAS_MAX)
        spec = {
            "law": {"expr": expr, "constants": dict(constants),
                    "local": {n: dict(t) for n, t in local.items()}},
            "space": self.space,
            "inputs": self.inputs,
            "support": {n: [float(self.data[n].min()), float(self.data[n].max())]
                        for n in self.inputs},
            "groups": self.group_labels if self.multi else [],
            "s": {g: 1.0 for g in self.group_labels},
            "log_inputs": self.coords.log_inputs,
            "center": self.coords.center.tolist(),
            "scale": self.coords.scale.tolist(),
        }
        arrays = {"coords": self.x, "residuals": debiased, "groups": self.groups.astype(str)}
        world = world_mod.World(spec, arrays)
        rng = np.random.default_rng(self.key.seed("calibration", self.task_id))
        s_by_group: dict[str, float] = {}
        r2: dict[str, dict[str, float]] = {}
        for g in self.group_labels:
            labels = None if not self.multi else g
            sets = {"records": {n: self._rows(g)[n].to_numpy(float) for n in self.inputs},
                    "grid": self._probe_points(g, CALIBRATION_POINTS, 11)}
            s = 1.0
            for points in sets.values():
                n = len(next(iter(points.values())))
                groups = None if labels is None else [labels] * n
                v_f = float(np.var(to_residual_space(world.mean(points, groups), self.space)))
                rep = {k: np.tile(v, CALIBRATION_DRAWS) for k, v in points.items()}
                draws = world.noise(rep, None if groups is None else groups * CALIBRATION_DRAWS,
                                    rng)
                # the mean square, not the variance: an offset in the draws is error too
                s = min(s, world_mod.calibration_factor(v_f, float(np.mean(draws**2))))
            s_by_group[g] = s
        spec["s"] = s_by_group
        # where the structure judge probes (the integrity screen used the same points)
        spec["judge"] = {"groups": self.probe_groups, "points": PROBES_PER_GROUP,
                         "salt": PROBE_SALT,
                         "support": {g: self.support(g) for g in self.probe_groups}}
        world = world_mod.World(spec, arrays)
        for g in self.group_labels:
            labels = None if not self.multi else g
            r2[g] = {}
            for name, points in (("records", {n: self._rows(g)[n].to_numpy(float)
                                              for n in self.inputs}),
                                 ("grid", self._probe_points(g, CALIBRATION_POINTS, 13))):
                n = len(next(iter(points.values())))
                r2[g][name] = world.sampled_r2(points, None if labels is None else [labels] * n,
                                               rng)
        spec["world_r2"] = r2
        return spec, arrays, world

    def identifiable(self, cand: synthesis.Candidate, world: world_mod.World, draw_no: int
                     ) -> tuple[bool, str, list[list[float]]]:
        """Simulate honest budgets (space-filling points over the support and the
        groups, every call, the most samples per point) and ask the data to prefer
        the law over each reduced law without one of its pieces (BIC)."""
        calls = int(self.caps["max_experiment_calls"])
        per_call = int(self.caps["max_points_per_call"])
        samples = int(self.caps.get("max_samples_per_point", 1))
        n = calls * per_call * samples
        deltas: list[list[float]] = []
        for rep in range(IDENTIFY_REPS):
            rng = np.random.default_rng(self.key.seed("identifiability", self.task_id, draw_no,
                                                      rep))
            points, groups = self._design(calls * per_call, rng)
            points = {k: np.repeat(v, samples) for k, v in points.items()}
            groups = None if groups is None else list(np.repeat(groups, samples))
            y = world.sample(points, groups, rng)
            row = []
            full = self._refit(cand, points, y, groups, drop=None)
            for i, p in enumerate(cand.pieces):
                if p.shared:
                    row.append(float("inf"))  # sharing is chosen by parsimony: nothing to test
                    continue
                reduced = self._refit(cand, points, y, groups, drop=i)
                k = len(p.constants) if p.constants else \
                    (len(self.group_labels) - 1 if p.per_group else 0)
                row.append(float(n * math.log(max(reduced, 1e-300) / max(full, 1e-300))
                                 - max(k, 1) * math.log(n)))
            deltas.append(row)
        ok = [sum(d[i] >= IDENTIFY_BIC for d in deltas) >= 2 for i in range(len(cand.pieces))]
        weak = [p.description for p, good in zip(cand.pieces, ok) if not good]
        return (not weak, "" if not weak else f"not identifiable within the budget: {weak}",
                deltas)

    def _design(self, n: int, rng: np.random.Generator
                ) -> tuple[dict[str, np.ndarray], list[str] | None]:
        groups = None
        if self.multi:
            order = rng.permutation(self.group_labels)
            groups = [str(order[i % len(order)]) for i in range(n)]
            parts = [self._probe_points(g, groups.count(g), int(rng.integers(1 << 30)))
                     for g in order if groups.count(g)]
            groups = [str(g) for g in order for _ in range(groups.count(g))]
            points = {k: np.concatenate([p[k] for p in parts]) for k in self.inputs}
            return points, groups
        u = (rng.permutation(n) + rng.random(n)) / n
        points = {}
        for j, name in enumerate(self.inputs):
            lo, hi = (float(self.data[name].min()), float(self.data[name].max()))
            uu = u if j == 0 else rng.permutation(u)
            points[name] = (lo * (hi / lo) ** uu if name in self.coords.log_inputs
                            else lo + (hi - lo) * uu)
        return points, groups

    def _refit(self, cand: synthesis.Candidate, points: dict[str, np.ndarray], y: np.ndarray,
               groups: list[str] | None, drop: int | None) -> float:
        """RSS (residual space) of the law, or of the law without piece ``drop``,
        fitted to simulated data from its true constants."""
        consts = dict(cand.constants)
        global_names, local_names = list(cand.global_names), list(cand.local_names)
        fixed: dict[str, float] = {}
        if drop is not None:
            p = cand.pieces[drop]
            # the piece's constants leave the fit: neutral, or (an onset) as they are
            fixed.update({n: p.neutral.get(n, consts[n]) for n in p.constants})
            global_names = [n for n in global_names if n not in p.constants]
            if p.per_group:
                local_names.remove(p.per_group)
                global_names.append(p.per_group)
                consts[p.per_group] = float(np.median(list(cand.local[p.per_group].values())))
        init = {**consts, **{n: float(np.median(list(t.values())))
                             for n, t in cand.local.items() if n in local_names}}
        data: dict[str, Any] = dict(points)
        data.update({k: np.float64(v) for k, v in fixed.items()})
        e = Expression(cand.expr)
        try:
            if self.multi and local_names:
                # start each group at its true values: the question is what the data say
                res = fit_grouped(e, data, y, np.asarray(groups), global_names, local_names,
                                  init, space=self.space, n_starts=1, max_nfev=400)
            else:
                res = fit_expression(e, data, y, [*global_names, *local_names], init,
                                     space=self.space, n_starts=2, max_nfev=600)
        except FitError:
            return float("inf")
        return float(res.rss)


def _freeze(form: structure.Form, names: Sequence[str], fixed: set[str]) -> structure.Form:
    """The form with the named parameters substituted by their init values."""
    subs = {p: v for p, n, v in zip(form.params, names, form.init) if n in fixed}
    keep = [i for i, n in enumerate(names) if n not in fixed]
    return structure.Form(form.expr.subs(subs), [form.params[i] for i in keep],
                          [form.init[i] for i in keep], form.inputs,
                          [form.local[i] for i in keep])


def synthesize(builder: WorldBuilder, refs: Sequence[Reference],
               extra_pieces: Sequence[synthesis.Piece] = ()) -> BuiltWorld:
    """The whole pipeline for one task; raises NoWorld with the reason."""
    base, base_fit, base_scores = builder.select_base(refs)
    names = synthesis.NameAllocator({*base.global_names, *base.local_names, *builder.inputs,
                                     *(n for r in refs for n in (*r.global_names, *r.local_names))})
    infos = [synthesis.InputInfo(n, float(builder.data[n].min()), float(builder.data[n].max()),
                                 world_mod.is_multi_decade(builder.data[n]), builder.units[n])
             for n in builder.inputs]

    def choose(purpose: str, options: Sequence[Any]) -> Any:
        return options[int(builder.key.uniform("literal", builder.task_id, purpose) * len(options))]

    pieces = synthesis.grammar(base.expr, infos, base.global_names, base.local_names,
                               builder.space == "log10", builder.multi, names, choose,
                               float(np.std(builder.y)) or 1.0)
    pieces += list(extra_pieces)
    start = {**base.init, **base_fit.constants,
             **{n: float(np.median(list(t.values()))) for n, t in base_fit.local.items()}}
    singles: list[synthesis.Candidate] = []
    for p in pieces:
        cand = synthesis.compose(base.expr, base.global_names, base.local_names, [p])
        try:
            builder.evaluate_candidate(cand, start, base_fit, refs, "single")
        except (FitError, ValueError) as err:
            cand.screen["execution"] = f"fail: {err}"
        singles.append(cand)
    admissible = [c.pieces[0] for c in singles if c.admissible]
    combos = synthesis.combinations(admissible)
    record: dict[str, Any] = {
        "base": base.name, "base_scores": base_scores,
        "singles": [{"kind": c.pieces[0].kind, "piece": c.pieces[0].description,
                     "plausibility": c.pieces[0].plausibility, "r2": c.r2,
                     "effect": c.effects[0] if c.effects else None, "screen": c.screen}
                    for c in singles],
        "admissible_pieces": len(admissible),
        "combinations": {str(k): len(v) for k, v in combos.items()},
        "draws": [],
    }
    if not admissible:
        raise NoWorld(f"no admissible piece for base {base.name}", record)
    if not any(combos.values()):
        raise NoWorld(f"the admissible pieces for base {base.name} are sharing edits only "
                      f"({', '.join(p.description for p in admissible)}), which enter a "
                      "world only beside a piece that adds structure", record)
    tried: set[synthesis.Combo] = set()
    # the key decides how many pieces; a failed draw is replaced by another of the same
    # size first, then by larger sizes, then smaller ones
    wanted = synthesis.pieces_wanted(builder.rng, combos)
    sizes = [wanted, *sorted(k for k in combos if k > wanted),
             *sorted((k for k in combos if k < wanted), reverse=True)]
    schedule = [k for k in sizes for _ in range(synthesis.DRAWS_PER_SIZE)]
    for draw_no, size in enumerate(schedule):
        combo = synthesis.draw(builder.rng, admissible, {size: combos.get(size, [])}, tried)
        if combo is None:
            continue
        tried.add(combo)
        chosen = [admissible[i] for i in combo]
        cand = synthesis.compose(base.expr, base.global_names, base.local_names, chosen)
        entry: dict[str, Any] = {"pieces": [p.description for p in chosen]}
        record["draws"].append(entry)
        try:
            builder.evaluate_candidate(cand, start, base_fit, refs, f"draw{draw_no}")
        except (FitError, ValueError) as err:
            cand.screen["execution"] = f"fail: {err}"
        entry["screen"] = dict(cand.screen)
        entry["effects"] = list(cand.effects)
        if not cand.admissible:
            continue
        spec, arrays, world = builder.make_world(cand.expr, cand.constants, cand.local)
        ok, why, deltas = builder.identifiable(cand, world, draw_no)
        entry["identifiability_delta_bic"] = deltas
        entry["screen"]["identifiability"] = "pass" if ok else f"fail: {why}"
        if not ok:
            continue
        importance = cand.effects
        law_pieces = [{"kind": p.kind, "description": p.description,
                       "constants": sorted(p.constants), "neutral": dict(p.neutral),
                       "shared": p.shared, "per_group": p.per_group,
                       "importance": float(e), "plausibility": p.plausibility,
                       "rationale": p.rationale}
                      for p, e in zip(cand.pieces, importance)]
        spec["law"].update({
            "global": cand.global_names, "local_names": cand.local_names,
            "base_reference": base.name, "base_expr": base.expr,
            "base_global": base.global_names, "base_local": base.local_names,
            "pieces": law_pieces, "added_terms": [p.description for p in cand.pieces],
            "r2_residual_space": cand.r2, "base_r2_residual_space": base_fit.r2,
            "rationale": (
                f"base {base.name}: the non-degenerate reference with the least residual "
                f"structure (B_b {base_scores[base.name]['structure_B_b']:.3f}); "
                f"{len(admissible)} of {len(singles)} single pieces admissible, "
                f"{sum(len(v) for v in combos.values())} combinations of one to three; the "
                f"world key drew {len(chosen)} piece(s) on draw {draw_no + 1}: "
                + "; ".join(f"{p.description} ({p.kind})" for p in chosen)),
        })
        record["chosen_draw"] = draw_no
        return BuiltWorld(spec, arrays, record, world, builder.frame)
    raise NoWorld(f"no drawn combination passed every screen in {len(record['draws'])} draws "
                  f"(base {base.name}; {len(admissible)} admissible pieces)", record)
