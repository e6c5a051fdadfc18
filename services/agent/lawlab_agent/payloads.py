"""The ``<experiment>`` payload: what a model wrote -> a simulator query.

Models write JSON the way people do: with comments, trailing commas, numbers
in quotes, a lone number where a list was meant. The reader forgives what is
unambiguous and refuses the rest with a message that says how to write it.
Whatever the text, it never raises anything but :class:`PayloadError`: a
malformed payload costs the model its turn, never the harness its attempt.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAX_PAYLOAD_CHARS = 1_000_000
_STRING = r'"(?:[^"\\]|\\.)*"'


class PayloadError(ValueError):
    """The payload cannot be read; the message is shown to the model."""


@dataclass(frozen=True)
class Experiment:
    inputs: dict[str, list[float]]  # in the names the model used
    group_ids: list[str] | None
    n_samples: int | None  # None: the simulator's minimum


def _strip_comments_and_commas(text: str) -> str:
    """Remove //, # and /* */ comments and trailing commas outside strings."""
    out, i = [], 0
    pattern = re.compile(rf"{_STRING}|//[^\n]*|#[^\n]*|/\*.*?\*/|,(?=\s*[\]}}])", re.S)
    for m in pattern.finditer(text):
        out.append(text[i:m.start()])
        token = m.group(0)
        if token.startswith('"'):
            out.append(token)
        i = m.end()
    out.append(text[i:])
    return "".join(out)


def _number(value: object, where: str) -> float:
    if isinstance(value, bool):
        raise PayloadError(f"{where}: expected a number, got {json.dumps(value)}")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise PayloadError(f"{where}: expected a number, got {json.dumps(value)[:40]}") from None
    else:
        raise PayloadError(f"{where}: expected a number, got {type(value).__name__}")
    if not math.isfinite(number):
        raise PayloadError(f"{where}: must be a finite number")
    return number


def _numbers(value: object, where: str) -> list[float]:
    if isinstance(value, (list, tuple)):
        return [_number(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        raise PayloadError(f"{where}: expected a list of numbers, got an object")
    return [_number(value, where)]  # one number: one point


def _group_ids(value: object) -> list[str]:
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for i, g in enumerate(items):
        if isinstance(g, bool) or not isinstance(g, (str, int, float)):
            raise PayloadError(f'"group_id"[{i}]: expected a group id (a string), got '
                               f"{type(g).__name__}")
        out.append(str(int(g)) if isinstance(g, float) and g.is_integer() else str(g))
    return out


def _json_object(payload: str, input_names: Sequence[str]) -> dict:
    """The payload's JSON object (a fenced block, comments and trailing commas forgiven)."""
    text = payload.strip()
    if text.startswith("```"):  # a fenced block inside the tags
        text = re.sub(r"^```[A-Za-z]*\s*|\s*```$", "", text)
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        try:
            doc = json.loads(_strip_comments_and_commas(text))
        except json.JSONDecodeError as err:
            raise PayloadError(f"the experiment payload is not valid JSON ({err.msg} at "
                               f"line {err.lineno} column {err.colno}); write one object such as "
                               f'{{"{input_names[0] if input_names else "x"}": [1, 2, 3], '
                               '"n_samples": 1}') from None
        except RecursionError:
            raise PayloadError("the experiment payload is nested too deeply") from None
    if not isinstance(doc, Mapping):
        raise PayloadError("the experiment payload must be a JSON object with one list per input")
    return dict(doc)


def parse_experiment(payload: str, input_names: Sequence[str], multi_group: bool) -> Experiment:
    """Read an experiment payload; raises PayloadError with a model-facing message."""
    if not isinstance(payload, str):
        raise PayloadError("the experiment payload must be text")
    if len(payload) > MAX_PAYLOAD_CHARS:
        raise PayloadError(f"the experiment payload is longer than {MAX_PAYLOAD_CHARS} characters")
    doc = _json_object(payload, input_names)
    n_samples = None
    if "n_samples" in doc:
        raw = doc.pop("n_samples")
        value = _number(raw[0] if isinstance(raw, list) and len(raw) == 1 else raw, '"n_samples"')
        if not value.is_integer():
            raise PayloadError('"n_samples": must be a whole number of samples per point')
        n_samples = int(value)
    groups = None
    for key in ("group_id", "group_ids"):
        if key in doc:
            if groups is not None:
                raise PayloadError('give "group_id" once (one id per point)')
            groups = _group_ids(doc.pop(key))
    if groups is not None and not multi_group:
        raise PayloadError('"group_id": this task is single-group; leave it out')
    inputs: dict[str, list[float]] = {}
    for name, value in doc.items():
        if not isinstance(name, str) or name not in input_names:
            raise PayloadError(f"unknown key {name!r}; the inputs are {list(input_names)}, plus "
                               '"n_samples"' + (' and "group_id"' if multi_group else ""))
        inputs[name] = _numbers(value, f'"{name}"')
    missing = [n for n in input_names if n not in inputs]
    if missing:
        raise PayloadError(f"missing input(s) {missing}: give one list per input")
    lengths = {len(v) for v in inputs.values()}
    if len(lengths) > 1:
        raise PayloadError("every input list must have the same length (one value per point): "
                           + ", ".join(f"{k}: {len(v)}" for k, v in inputs.items()))
    n_points = lengths.pop() if lengths else 0
    if n_points == 0:
        raise PayloadError("no points: give at least one value per input")
    if multi_group:
        if groups is None:
            raise PayloadError('"group_id": this task has groups; give one group id per point')
        if len(groups) == 1 and n_points > 1:
            groups = groups * n_points  # one id for every point
        if len(groups) != n_points:
            raise PayloadError(f'"group_id": {len(groups)} ids for {n_points} points '
                               "(one per point, or one for all)")
    return Experiment(inputs, groups, n_samples)
