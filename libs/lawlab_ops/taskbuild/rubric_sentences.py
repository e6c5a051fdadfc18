"""Official validity-rubric sentences -> executable rubric items, only where exact.

The official SciLaws-Bench rubric of a task is a list of plain-language sentences
(``validity_rubrics`` in ``metadata.yaml``); the paper's judge reads each one.
lawlab keeps every sentence verbatim and turns one into an executable item
(:mod:`lawlab.judging.rubric`) only when the whole sentence matches one of the readings
below, word for word apart from articles and the allowed closing phrase "with
(all) other inputs (held) fixed" (which is how lawlab probes: the other inputs
at their medians). Anything else (a negation the readings do not name, a
condition, a second input, a structural claim, a unit) is left to the LLM judge:
:func:`read` returns None, never a guess.

Readings (SUBJECT is the target's own name or symbol, with or without "(the)
predicted" before it, "the predicted value", "the output" or "the prediction"; a
"predicted" quantity that is not the target, e.g. "predicted mass-specific BMR"
where the target is whole-organism BMR, is not the target):

- SUBJECT is (strictly|always) positive | is greater than 0 -> positive
- SUBJECT is non-negative | nonnegative | never negative | not negative |
  greater than or equal to 0 -> nonnegative
- SUBJECT is|stays|remains finite -> finite
- SUBJECT is|stays|lies|remains within [a, b] | between a and b | in [a, b]
  (closed bounds; numbers with the target's own unit or none) -> bounded
- SUBJECT is (strictly) increasing|decreasing in|with INPUT; SUBJECT is
  non-decreasing|non-increasing in|with INPUT; SUBJECT increases|decreases
  (monotonically) with INPUT; SUBJECT increases|decreases|is non-decreasing|
  is non-increasing as INPUT increases|decreases -> monotone (a "non-" reading
  is not strict; "as INPUT decreases" turns the direction round)
- SUBJECT depends on INPUT -> depends_on
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?"
_SUFFIX = r"(?:,?\s+with\s+(?:all\s+)?(?:the\s+)?other\s+inputs\s+(?:held\s+)?fixed)?"
_GENERIC_SUBJECTS = ("the output", "output", "the prediction", "prediction", "predictions",
                     "the predictions", "the law", "the formula")


# "the predicted value" and the like: the target whatever it is called
_PREDICTED_NOUNS = ("value", "values", "output", "target", "quantity")


def _norm(text: str) -> str:
    t = text.strip().strip('"').strip("'").strip()
    t = re.sub(r"\s+", " ", t)
    return t.rstrip(".").strip()


# a subject holding one of these words restricts where the sentence holds (a
# condition) or negates it: such a sentence is not read
_QUALIFIERS = {"for", "when", "if", "at", "above", "below", "under", "near", "beyond",
               "within", "with", "without", "unless", "except", "only", "where", "while",
               "after", "before", "during", "not", "never", "no", "outside", "inside"}


def _subject_ok(subject: str, target: str, symbol: str) -> bool:
    s = subject.strip().lower()
    if set(s.split()) & _QUALIFIERS:
        return False
    names = {target.lower(), target.lower().replace("_", " ")}
    if symbol:
        names.add(symbol.lower())
    bare = re.sub(r"^(the|a|an)\s+", "", s)
    # "predicted X" is the target only when X names it: "predicted mass-specific BMR"
    # of a task whose target is log whole-organism BMR is another quantity
    predicted = bare.startswith("predicted ")
    bare = re.sub(r"^predicted\s+", "", bare)
    # "value" alone is any value: only "the predicted value" is the target
    return s in _GENERIC_SUBJECTS or bare in names or (predicted and bare in _PREDICTED_NOUNS)


def _mentioned(text: str, inputs: Sequence[str]) -> list[str]:
    low = text.lower()
    return [c for c in inputs if re.search(rf"(?<![\w]){re.escape(c.lower())}(?![\w])", low)]


def _unit_ok(unit: str, target_unit: str) -> bool:
    unit = unit.strip()
    return unit == "" or (bool(target_unit.strip()) and unit == target_unit.strip())


def read(text: str, inputs: Sequence[str], target: str = "", target_symbol: str = "",
         target_unit: str = "") -> dict[str, Any] | None:
    """The executable item a sentence states exactly (without ``id``/``description``),
    or None when it is for the LLM judge."""
    t = _norm(text)
    low = t.lower()
    named = _mentioned(t, inputs)
    subj = r"(?P<subj>[^,;:]+?)"

    # sign, finiteness: no input may be named (a sentence naming one is conditional)
    sign_rules = [
        (rf"^{subj} (?:is|stays|remains) (?:strictly |always )?positive{_SUFFIX}$", "positive"),
        (rf"^{subj} is (?:always )?greater than (?:zero|0){_SUFFIX}$", "positive"),
        (rf"^{subj} (?:is|stays|remains) (?:always )?(?:non-negative|nonnegative|never "
         rf"negative|not negative){_SUFFIX}$", "nonnegative"),
        (rf"^{subj} is (?:always )?greater than or equal to (?:zero|0){_SUFFIX}$",
         "nonnegative"),
        (rf"^{subj} (?:is|stays|remains) (?:always )?finite{_SUFFIX}$", "finite"),
    ]
    for pattern, kind in sign_rules:
        m = re.match(pattern, low)
        if m and not named and _subject_ok(m.group("subj"), target, target_symbol):
            return {"kind": kind}

    # closed bounds
    for pattern in (rf"^{subj} (?:is|stays|lies|remains) (?:within|in) \[\s*(?P<lo>{_NUMBER})"
                    rf"\s*,\s*(?P<hi>{_NUMBER})\s*\](?P<unit>[^,]*?){_SUFFIX}$",
                    rf"^{subj} (?:is |stays |lies |remains )?(?:bounded )?between "
                    rf"(?P<lo>{_NUMBER})(?P<unit1>[^,]*?) and (?P<hi>{_NUMBER})"
                    rf"(?P<unit>[^,]*?){_SUFFIX}$"):
        m = re.match(pattern, low)
        if m and not named and _subject_ok(m.group("subj"), target, target_symbol):
            units = [m.group("unit")] + ([m.group("unit1")] if "unit1" in m.groupdict() else [])
            if not all(_unit_ok(u, target_unit.lower()) for u in units):
                return None
            if "inclusive" in low or "exclusive" in low:
                return None
            lo, hi = float(m.group("lo")), float(m.group("hi"))
            return {"kind": "bounded", "lo": lo, "hi": hi} if lo < hi else None

    # monotone and dependence: exactly one input named, and it is the one in the slot
    if len(named) != 1:
        return None
    inp = named[0]
    x = re.escape(inp.lower())
    words = {"increasing": ("increasing", True), "decreasing": ("decreasing", True),
             "non-decreasing": ("increasing", False), "nondecreasing": ("increasing", False),
             "non-increasing": ("decreasing", False), "nonincreasing": ("decreasing", False)}
    word = "|".join(sorted(map(re.escape, words), key=len, reverse=True))
    rules = [
        rf"^{subj} is (?:(?P<strict>strictly|monotonically) )?(?P<w>{word}) (?:in|with) {x}"
        rf"{_SUFFIX}$",
        rf"^{subj} (?P<v>increases|decreases) (?:monotonically |strictly )?with "
        rf"(?:increasing )?{x}{_SUFFIX}$",
        rf"^{subj} (?:(?P<v>increases|decreases)|is (?P<w>{word})) (?:monotonically |strictly )?"
        rf"as {x} (?P<d>increases|decreases|rises|falls){_SUFFIX}$",
    ]
    for pattern in rules:
        m = re.match(pattern, low)
        if not m or not _subject_ok(m.group("subj"), target, target_symbol):
            continue
        gd = m.groupdict()
        if gd.get("w"):
            direction, strict = words[gd["w"]]
        else:
            direction, strict = ("increasing" if gd["v"] == "increases" else "decreasing"), True
        if gd.get("d") in ("decreases", "falls"):
            direction = "decreasing" if direction == "increasing" else "increasing"
        return {"kind": "monotone", "input": inp, "direction": direction, "strict": strict}
    m = re.match(rf"^{subj} depends on {x}{_SUFFIX}$", low)
    if m and _subject_ok(m.group("subj"), target, target_symbol):
        return {"kind": "depends_on", "input": inp}
    return None


def item_id(text: str, index: int) -> str:
    slug = re.sub(r"\W+", "_", _norm(text).lower()).strip("_")[:40]
    return f"r{index + 1}_{slug}" if slug else f"r{index + 1}"
