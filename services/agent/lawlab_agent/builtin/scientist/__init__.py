"""The ``scientist`` agent: a careful experimentalist's search, without the catalogue.

What it knows is what a scientist has: the task's context and **published
reference forms** (the prompt's material) and a **generic vocabulary of
corrections** that any law may need (:class:`Vocabulary`): a freed exponent, an
input measured from a shifted origin, a smooth onset delay, a rate that rises
or falls with the input (the input entering a constant), an added linear,
quadratic, threshold or exponential term, a multiplicative or attenuating
correction, the second harmonic of a periodic input and a cycle whose amplitude
drifts, an offset, a power or a saturation of the whole response, and for
groups the change of which parameters are shared (C.5). It never reads the
task's catalogue of cited mechanisms (the ``variants`` of its specification) or
docs/worlds.md: the vocabulary is the same for every task, made concrete by the
task's inputs, their ranges and the published forms only.

How it works (:mod:`lawlab_agent.builtin.search`, shared with the experimenter):
space-filling experiments first; then each analysis fits the candidates on all
data so far and ranks them by BIC, and proposes the next experiment where the
leading candidates disagree most relative to the noise. Beyond the shared loop:

- **Structure from residuals.** After each comparison the law ranked first is
  refitted and its residuals read (``scientist/fit.py`` in the sandbox): a trend
  or a curvature left in an input, a difference between groups. The next round
  tries the corrections in the inputs the residuals point to first, and the
  trajectory says so, as an LLM agent would.
- **Rivals stay in play.** Every structure within 10 BIC of the least is refitted
  in the next round beside the current law's neighbours (at most eight, and 32
  candidates in all), so the
  designed experiments keep telling them apart and a correction that loses
  early can win with more data.
- **A correction is kept only when the data pay for it:** the law with the
  fewest constants within 6 BIC of the least (strong evidence, Kass and Raftery
  1995), the lower BIC among laws with as many.
- **It stops spending when one structure wins clearly:** the same law leads two
  analyses in a row, at least two designed experiments were made, and no other
  candidate comes within 10 BIC of it.

Deterministic for a seed (the designs and the pool of points are drawn from
it) and bounded by counts (calls, candidates, fits), never by wall time.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Sequence
from typing import Any

from lawlab.tasks.library import SolverTask, Variable
from lawlab.tasks.specs import RefSpec, TaskSpec
from lawlab.worlds import mechanisms
from lawlab.worlds.mechanisms import ConstantSpec, Variant
from lawlab_agent.builtin.kit import script
from lawlab_agent.builtin.search import ANALYSIS, DESIGN_CALLS, Hypotheses, Hypothesis, SearchAgent
from lawlab_agent.policy import TrialContext

STUDY = script("scientist")
STUDY_PREFIX = "LAWLAB_STUDY "
CLEAR = 10.0  # BIC units by which the leading law must beat every other to stop spending
KEEP = 10.0  # BIC units: a structure this close to the least stays a rival, refitted each round
KEEP_MAX = 8  # rivals kept beside the current law's neighbours
MAX_TOTAL = 32  # candidates per analysis: each is fitted three times in the sandbox
DESIGNED = 2  # designed experiments (after the space-filling ones) before it may stop
EVIDENCE = 0.01  # a residual pattern below this p-value points at its input
SOURCE = "the scientist's generic vocabulary (lawlab_agent.builtin.scientist)"


def _origin(v: Variable) -> float | None:
    """A round origin for an input far from zero (a calendar year): a term in it is
    written in ``x - origin``, so that a rate is not multiplied by 2000."""
    span = v.max - v.min
    if span <= 0 or v.min <= 2 * span:
        return None
    step = 10.0 ** math.floor(math.log10(span))
    return math.floor(v.min / step) * step


def _top_terms(expr: str) -> list[str]:
    """The top-level additive terms of ``expr``."""
    terms: list[str] = []

    def flatten(node: ast.expr) -> None:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            flatten(node.left)
            flatten(node.right)
        else:
            terms.append(ast.unparse(node))

    flatten(ast.parse(expr, mode="eval").body)
    return terms


def _periodic_terms(expr: str, x: str) -> list[str] | None:
    """The top-level additive terms of ``expr`` that hold a sine or cosine of
    ``x`` (the law's cycle), or None when it has none or is nothing else."""
    def cyclic(term: str) -> bool:
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                   and n.func.id in ("sin", "cos")
                   and x in mechanisms.names_in(ast.unparse(n))
                   for n in ast.walk(ast.parse(term, mode="eval")))

    terms = _top_terms(expr)
    found = [t for t in terms if cyclic(t)]
    return found if found and len(found) < len(terms) else None


class Axis:
    """An input as the vocabulary writes it: measured from a round origin when it
    lies far from zero (:func:`_origin`), with its range and scale there."""

    def __init__(self, v: Variable) -> None:
        self.name, self.span = v.name, max(v.max - v.min, 1e-12)
        self.origin = _origin(v)
        shift = self.origin or 0.0
        self.term = f"({v.name} - {self.origin:.10g})" if self.origin is not None else v.name
        self.lo, self.hi = v.min - shift, v.max - shift
        self.size = max(abs(self.hi), abs(self.lo), self.span, 1e-12)
        self.multi_decade = v.min > 0 and v.max / v.min >= 100


class Vocabulary:
    """The generic corrections of one published form, as edits
    (:class:`lawlab.worlds.mechanisms.Variant`): the same list for every task,
    made concrete by the task's inputs and ranges and the form's own text."""

    def __init__(self, task: SolverTask, ref: RefSpec) -> None:
        self.task, self.ref = task, ref
        self.taken = set(mechanisms.names_in(ref.expr)) | {v.name for v in task.inputs} | {"F"}
        t = task.target
        self.y_scale = max(abs(t.min), abs(t.max), t.max - t.min, 1e-12)
        self.positive_response = t.min > 0
        self.about: dict[str, str] = {}  # edit id -> the input it is about ("": the whole law)

    def _name(self, stem: str) -> str:
        name = stem
        while name in self.taken:
            name += "_"
        self.taken.add(name)
        return name

    def _edit(self, key: str, what: str, kind: str, body: Any,
              constants: Sequence[tuple[str, float, float]], about: str = "") -> Variant:
        self.about[key] = about
        return Variant(key, what, self.ref.name, kind, body,
                       tuple(ConstantSpec(n, init, neutral) for n, init, neutral in constants),
                       SOURCE, what)

    def edits(self) -> list[Variant]:
        out: list[Variant] = []
        in_base = mechanisms.names_in(self.ref.expr)
        for v in self.task.inputs:
            out += self._input_edits(v, v.name in in_base)
        out += self._whole_edits()
        return out

    def _input_edits(self, v: Variable, in_base: bool) -> list[Variant]:
        x = Axis(v)
        out = self._substitutions(x) if in_base and x.origin is None else []
        out += self._terms(x)
        cycle = _periodic_terms(self.ref.expr, x.name)
        if cycle is not None:
            out += self._cycle(x, cycle)
        return out

    def _substitutions(self, ax: Axis) -> list[Variant]:
        """The input rewritten where the form uses it: a freed exponent, a shifted
        origin, a smooth onset delay, a rate that falls or rises with the input."""
        x, n, out = ax.name, self._name, []
        if ax.lo >= 0:  # 0 ** p is 0 for the positive exponents it means
            p = n(f"pw_{x}")
            out.append(self._edit(f"power_{x}", f"{x} enters with a freed exponent",
                                  "substitute", ((x, f"{x} ** {p}"),), [(p, 1.02, 1.0)], x))
        s = n(f"sh_{x}")
        start = 0.1 * ax.lo if ax.multi_decade else 0.01 * ax.span
        out.append(self._edit(f"shift_{x}", f"{x} measured from a shifted origin",
                              "substitute", ((x, f"{x} + {s}"),), [(s, start, 0.0)], x))
        if ax.lo >= 0:
            lag = n(f"lag_{x}")
            out.append(self._edit(
                f"delay_{x}", f"a smooth onset delay in {x}", "substitute",
                ((x, f"sqrt({x} ** 2 + {lag} ** 2) - {lag}"),), [(lag, 0.05 * ax.span, 0.0)],
                x))
            a = n(f"sl_{x}")
            out.append(self._edit(f"slowing_{x}", f"a rate that falls as {x} grows",
                                  "substitute", ((x, f"{x} / (1 + {a} * {x})"),),
                                  [(a, 0.01 / ax.size, 0.0)], x))
        a = n(f"ac_{x}")
        out.append(self._edit(f"rising_{x}", f"a rate that rises with {x}", "substitute",
                              ((x, f"{x} * (1 + {a} * {x})"),), [(a, 0.01 / ax.size, 0.0)], x))
        return out

    def _terms(self, ax: Axis) -> list[Variant]:
        """Terms and factors in the input (measured from its origin): linear,
        quadratic, a change of slope, a correction factor, an attenuation, an
        added exponential."""
        x, o, size, y, n = ax.name, ax.term, ax.size, self.y_scale, self._name
        a, q, m, th, x0 = n(f"ad_{x}"), n(f"aq_{x}"), n(f"mc_{x}"), n(f"th_{x}"), n(f"on_{x}")
        mid = (ax.lo + ax.hi) / 2
        out = [self._edit(f"linear_{x}", f"an added term linear in {x}", "add", f"{a} * {o}",
                          [(a, 0.01 * y / size, 0.0)], x),
               self._edit(f"quadratic_{x}", f"an added term quadratic in {x}", "add",
                          f"{q} * {o} ** 2", [(q, 0.01 * y / size ** 2, 0.0)], x),
               self._edit(f"factor_{x}", f"a correction factor linear in {x}", "multiply",
                          f"1 + {m} * {o}", [(m, 0.01 / size, 0.0)], x),
               self._edit(f"threshold_{x}", f"a change of slope above an onset in {x}", "add",
                          f"{th} * ({o} - {x0} + abs({o} - {x0})) / 2",
                          [(th, 0.05 * y / ax.span, 0.0), (x0, mid, mid)], x)]
        if ax.lo >= 0:
            at, c, k = n(f"at_{x}"), n(f"ce_{x}"), n(f"ke_{x}")
            out += [self._edit(f"attenuation_{x}", f"an exponential attenuation in {x}",
                               "multiply", f"exp(-{at} * {o})", [(at, 0.01 / size, 0.0)], x),
                    self._edit(f"exp_term_{x}", f"an added exponential term in {x}", "add",
                               f"{c} * exp(-{k} * {o})",
                               [(c, 0.05 * y, 0.0), (k, 3.0 / ax.span, 3.0 / ax.span)], x)]
        return out

    def _cycle(self, ax: Axis, cycle: list[str]) -> list[Variant]:
        """A periodic form: its second harmonic, and its amplitude drifting."""
        x, y, n = ax.name, self.y_scale, self._name
        a2, b2, g = n(f"a2_{x}"), n(f"b2_{x}"), n(f"gr_{x}")
        rest = [term for term in _top_terms(self.ref.expr) if term not in cycle]
        grown = " + ".join([*rest, f"({' + '.join(cycle)}) * exp({g} * {ax.term})"])
        return [self._edit(f"harmonic2_{x}", f"the second harmonic of the cycle in {x}", "add",
                           f"{a2} * sin(4 * pi * {x}) + {b2} * cos(4 * pi * {x})",
                           [(a2, 0.01 * y, 0.0), (b2, 0.01 * y, 0.0)], x),
                self._edit(f"drifting_cycle_{x}",
                           f"the cycle's amplitude drifts exponentially with {x}", "replace",
                           grown, [(g, 0.01 / ax.size, 0.0)], x)]

    def _whole_edits(self) -> list[Variant]:
        n, y = self._name, self.y_scale
        c = n("off")
        out = [self._edit("offset", "an offset of the whole response", "add", c,
                          [(c, 0.01 * y, 0.0)])]
        q = n("qs")
        out.append(self._edit("saturating_response", "the response saturates as a whole",
                              "wrap", f"F / (1 + {q} * F)", [(q, 0.01 / y, 0.0)]))
        if self.positive_response:
            nu = n("nu")
            out.append(self._edit("power_response", "the response as a power of the form",
                                  "wrap", f"F ** {nu}", [(nu, 1.02, 1.0)]))
        return out


class GenericHypotheses(Hypotheses):
    """The published forms and, around each, the generic vocabulary (and the changes
    of sharing, Type II), tried in the order the residuals point to."""

    def __init__(self, task: SolverTask, references: Sequence[RefSpec]) -> None:
        super().__init__(task, references)
        self.evidence: dict[str, Any] = {}  # the last residual study (scientist/fit.py)
        self.about: dict[str, str] = {}  # edit id -> the input it is about

    def offered(self, base: str) -> list[Variant]:
        vocabulary = Vocabulary(self.task, self.refs[base])
        edits = vocabulary.edits()
        self.about.update(vocabulary.about)
        return edits

    def pointed(self, v: Variant) -> float:
        """How strongly the last residual study points at edit ``v`` (a p-value:
        its input's trend or curvature; the groups' difference for a change of
        sharing; the strongest pattern for an edit of the whole response)."""
        inputs = self.evidence.get("inputs", {})
        if v.is_sharing:
            return float(self.evidence.get("groups", 1.0))
        x = self.about.get(v.id, "")
        pool = [inputs[x]] if x in inputs else list(inputs.values())
        return min((min(p["trend"], p["curve"]) for p in pool), default=1.0)

    def order(self, base: str, keys: list[str]) -> list[str]:
        if not self.evidence:
            return keys
        pieces = self.pieces(base)
        return sorted(keys, key=lambda k: self.pointed(pieces[k]))


class ScientistAgent(SearchAgent):
    name = "scientist"

    def hypotheses(self, task: SolverTask, spec: TaskSpec) -> Hypotheses:
        # the published forms only: never spec.variants (the catalogue)
        return GenericHypotheses(task, spec.references)

    def _code(self, cands: list[dict[str, Any]], args: str) -> str:
        assert self._space is not None
        return (f"{ANALYSIS}\n{STUDY}\nCANDIDATES = {cands!r}\n"
                f"study(main(CANDIDATES, {args}), CANDIDATES, {self._space.log_space!r})")

    def _read(self, ctx: TrialContext) -> None:
        super()._read(ctx)
        study = self._result_lines(ctx, STUDY_PREFIX)
        if isinstance(self._space, GenericHypotheses):
            self._space.evidence = study if study and study.get("ok") else {}

    def _complexity(self, name: str, sizes: dict[str, int]) -> int:
        """Constants, not edits: another published form with as many constants as
        the current law plus a correction is not simpler for having no edit."""
        return sizes.get(name, 0)

    def _candidates(self) -> list[Hypothesis]:
        """The shared loop's candidates and the rivals of the last round: every
        structure within KEEP of the least BIC, restarted from its own fit."""
        cands = super()._candidates()
        if not self._ranking or self._space is None:
            return cands
        seen = {h.name for h in cands}
        least = min(self._ranking.values())
        kept = [n for n in sorted(self._ranking, key=lambda n: self._ranking[n])
                if n not in seen and n in self._asked and n in self._fits
                and self._ranking[n] - least <= KEEP][:KEEP_MAX]
        rivals = [self._space.compose(self._asked[n].base, self._asked[n].pieces,
                                      self._start(self._fits[n])) for n in kept]
        # the current law, the rivals, the bare forms and each edit removed come first;
        # then the corrections in the order the residuals point to, up to the cap
        best = self._best.pieces if self._best is not None else ()
        first = cands[:1] + rivals + [h for h in cands[1:] if len(h.pieces) < len(best)
                                      or not h.pieces]
        rest = [h for h in cands[1:] if h not in first]
        return (first + rest)[:MAX_TOTAL]

    def _why(self, cands: list[Hypothesis]) -> str:
        if self._best is None:
            forms = ", ".join(h.name for h in cands)
            return (f"I start from the published forms ({forms}) and compare them by BIC on "
                    "everything measured so far; then I read the residuals of the best.")
        space = self._space
        assert isinstance(space, GenericHypotheses)
        said = [f"{x} ({'trend' if p['trend'] <= p['curve'] else 'curvature'} p="
                f"{min(p['trend'], p['curve']):.2g})"
                for x, p in space.evidence.get("inputs", {}).items()
                if min(p["trend"], p["curve"]) < EVIDENCE]
        if space.evidence.get("groups", 1.0) < EVIDENCE:
            said.append(f"the groups (p={space.evidence['groups']:.2g})")
        lead = (f"The residuals of {self._best.name} still depend on " + ", ".join(said) +
                ", so I try corrections there first" if said else
                f"The residuals of {self._best.name} show no pattern at p < {EVIDENCE:g}; I "
                "still test each correction, since BIC on all the data is the judge")
        return (f"{lead}: {len(cands)} candidates (one correction more, or one less), "
                "ranked by BIC; a correction stays only if it gains 6 BIC.")

    def settled(self) -> bool:
        if not self._stalled or self._best is None or \
                self._experiments < DESIGN_CALLS + DESIGNED:
            return False
        others = [b for name, b in self._ranking.items() if name != self._best.name]
        return bool(others) and min(others) - self._ranking[self._best.name] >= CLEAR
