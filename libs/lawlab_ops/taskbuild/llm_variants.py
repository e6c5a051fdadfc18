"""The optional LLM hook of hidden-law synthesis.

An OpenAI-compatible model may propose structural variants of the selected
reference. Its proposals join the grammar's pieces and pass through the same
screens; its optional plausibility verdict (0 to 1) weighs the keyed draw like
the grammar's stated criteria do; nothing it says is trusted. A proposal must
be a restricted expression (lawlab.law.expr) over the task's inputs, the
reference's constants and exactly one new constant (named in the prompt, so it
cannot collide) whose ``neutral`` value gives back the reference. A proposal
is a whole variant: it is drawn alone, never combined with other pieces.
Malformed proposals are recorded with the reason and dropped.

Use: ``lawlab tasks build --llm-base-url URL --llm-model NAME`` (key from
LAWLAB_LLM_API_KEY). The proposals are written into the task's answer key
(``simulator/world.json``, ``law.llm_proposals``), so a build is reproducible
from them even though the model is not.
"""

from __future__ import annotations

import json
import math
import os
import re
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lawlab.law.expr import Expression, ExpressionError
from lawlab.worlds.mechanisms import ConstantSpec, Variant
from lawlab_ops.taskbuild.synthesis import PLAUSIBILITY, Piece

MAX_PROPOSALS = 8
TIMEOUT = 120.0


@dataclass(frozen=True)
class ProposalRequest:
    task_id: str
    context: str
    target: str
    inputs: Sequence[str]
    reference: str
    constants: Sequence[str]
    new_constant: str = "h"


Proposer = Callable[[ProposalRequest], str]  # returns the model's raw reply

PROMPT = """You help build a benchmark of scientific law discovery. The task:

{context}

Target: {target}. Inputs: {inputs}.
The published law we start from (constants {constants} are fitted to data):

    {target} = {reference}

Propose up to {n} scientifically plausible structural variants of this law,
such as an added term in an existing input, a multiplicative correction, a
freed exponent, an attenuation factor or a saturation. Each variant must:
- be one Python-syntax expression over the inputs, the constants above and
  exactly one new constant named {h};
- use only + - * / ** and the functions exp, log, log10, sqrt, sin, cos, tanh, abs;
- give back the published law exactly when {h} equals its "neutral" value.

Rate each variant's physical plausibility from 0 (implausible) to 1 (as
plausible as the published law).

Reply with JSON only:
{{"variants": [{{"expr": "...", "neutral": 0.0, "init": 0.01, "plausibility": 0.7,
  "why": "..."}}]}}
"""


def prompt(req: ProposalRequest) -> str:
    return PROMPT.format(context=req.context.strip(), target=req.target,
                         inputs=", ".join(req.inputs), reference=req.reference,
                         constants=", ".join(req.constants), n=MAX_PROPOSALS,
                         h=req.new_constant)


def openai_proposer(base_url: str, model: str, api_key: str | None = None) -> Proposer:
    """A proposer backed by an OpenAI-compatible chat-completions endpoint."""
    key = api_key if api_key is not None else os.environ.get("LAWLAB_LLM_API_KEY", "")

    def propose(req: ProposalRequest) -> str:
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": prompt(req)}],
                           "max_completion_tokens": 2048}).encode()
        http = urllib.request.Request(
            f"{base_url.rstrip('/')}/chat/completions", data=body, method="POST",
            headers={"Content-Type": "application/json",
                     **({"Authorization": f"Bearer {key}"} if key else {})})
        with urllib.request.urlopen(http, timeout=TIMEOUT) as resp:  # noqa: S310 (configured URL)
            doc = json.loads(resp.read())
        return str(doc["choices"][0]["message"].get("content") or "")

    return propose


def _json_object(text: str) -> Any:
    fenced = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    candidate = fenced.group(1) if fenced else text[text.find("{"): text.rfind("}") + 1]
    return json.loads(candidate)


def parse(reply: str, req: ProposalRequest) -> tuple[list[Piece], list[dict[str, str]]]:
    """The model's reply -> (pieces for the screens, rejected proposals with reasons)."""
    try:
        doc = _json_object(reply)
        items = doc["variants"]
        if not isinstance(items, list):
            raise TypeError("'variants' is not a list")
    except (ValueError, KeyError, TypeError) as err:
        return [], [{"expr": reply[:200], "reason": f"unreadable reply: {err}"}]
    h = req.new_constant
    allowed = set(req.inputs) | set(req.constants) | {h}
    variants: list[Piece] = []
    rejected: list[dict[str, str]] = []
    for item in items[:MAX_PROPOSALS]:
        expr = str(item.get("expr", "")) if isinstance(item, dict) else str(item)
        try:
            if not isinstance(item, dict):
                raise ExpressionError("each variant must be an object with expr and neutral")
            parsed = Expression(expr)
            unknown = parsed.free(allowed)
            if unknown:
                raise ExpressionError(f"unknown names {sorted(unknown)}")
            if h not in parsed.names:
                raise ExpressionError(f"no new constant {h!r}")
            neutral, init = float(item["neutral"]), float(item["init"] if "init" in item else item["neutral"])
            if not (math.isfinite(neutral) and math.isfinite(init)):
                raise ExpressionError("neutral and init must be finite numbers")
            plausibility = float(item.get("plausibility", PLAUSIBILITY["llm_proposal"][0]))
            if not math.isfinite(plausibility):
                raise ExpressionError("plausibility must be a number from 0 to 1")
        except (ExpressionError, KeyError, TypeError, ValueError) as err:
            rejected.append({"expr": expr[:200], "reason": str(err)})
            continue
        if any(v.description == parsed.text for v in variants):
            rejected.append({"expr": expr[:200], "reason": "duplicate"})
            continue
        why = str(item.get("why", "")).strip() or "no reason given"
        variants.append(Piece("llm_proposal", "", parsed.text, {h: init}, {h: neutral},
                              lambda e, text=parsed.text: text,
                              min(1.0, max(0.05, plausibility)),
                              f"LLM-proposed edit: {why}"[:200]))
    return variants, rejected


def as_variant(piece: Piece, base: str, index: int) -> Variant:
    """A proposal as a catalogue variant of ``base`` (a whole rewrite of the law; its
    one new constant unbounded: the model states no sign)."""
    (name, init), = piece.constants.items()
    neutral = piece.neutral[name]
    if init == neutral:
        init = neutral + piece.unit
    return Variant(f"llm_{index + 1}", piece.description, base, "replace", piece.apply(""),
                   (ConstantSpec(name, float(init), float(neutral)),),
                   "proposed by a language model (lawlab tasks build --llm-base-url)",
                   piece.rationale)
