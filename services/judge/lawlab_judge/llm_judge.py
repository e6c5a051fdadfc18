"""An optional LLM judge backend for validity and structure (OpenAI-compatible).

Our own prompts; the verdict comes back as JSON in the same schema as the
deterministic judges. A reply that is not valid JSON in that schema is asked
for again once; if it is still malformed the verdict is recorded as null
(``status = "llm_malformed"``, no score), never dropped and never guessed.
The anti-hacking gate stays deterministic: an LLM verdict cannot lift it.

Configuration (environment of the judge service):
  LAWLAB_JUDGE_LLM_BASE_URL   the endpoint (e.g. http://127.0.0.1:8000/v1)
  LAWLAB_JUDGE_LLM_MODEL      the model
  LAWLAB_JUDGE_LLM_API_KEY    the key (may be empty for local servers)
A request chooses the backend with ``JudgeRequest.backend`` ("llm"); the
default is the deterministic judge.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from lawlab import chat
from lawlab.rpc.settings import JudgeSettings
from lawlab.tasks.library import Task

T = TypeVar("T")
LEVELS = (0.0, 0.25, 0.5, 0.75, 1.0)

VALIDITY_PROMPT = """You check a proposed scientific law against a rubric of validity criteria.

Problem: {title}
Context: {context}
Target: {target}
Inputs:
{inputs}

Submitted law (a Python module; predict(X, **constants) computes the target):
```python
{source}
```

Rubric items (judge each on its own, from the law's mathematical form and the input ranges):
{items}

Reply with JSON only, exactly this shape:
{{"items": [{{"item_id": "<id>", "passed": true|false, "evidence": "<one sentence>"}}, ...]}}
with one entry per rubric item, in the same order."""

STRUCTURE_PROMPT = """You compare a submitted law with a hidden reference law, structurally.

Inputs: {inputs}
Hidden law: {hidden}
Its published base form: {base}
Submitted law (a Python module; predict(X, **constants)):
```python
{source}
```

Levels: 0 unrelated or invalid; 0.25 relevant variables or trend only; 0.5 the published base
form recovered; 0.75 the base form plus most added terms; 1.0 the full hidden structure up to
algebraic rearrangement and the values of constants.

Reply with JSON only, exactly this shape:
{{"level": 0|0.25|0.5|0.75|1, "matched": ["<term>", ...], "missed": ["<term>", ...],
  "explanation": "<one sentence>"}}"""


class LLMJudgeUnavailable(RuntimeError):
    pass


@dataclass
class LLMConfig:
    base_url: str
    model: str
    key: str = ""
    timeout: float = 120.0

    @classmethod
    def from_settings(cls, settings: JudgeSettings) -> LLMConfig | None:
        if not settings.llm_base_url or not settings.llm_model:
            return None
        return cls(settings.llm_base_url, settings.llm_model, settings.llm_api_key)


def validity_prompt(task: Task, source: str) -> tuple[str, list[str]]:
    """The validity question for the judge model, and the rubric's item ids."""
    meta = task.meta
    items = task.llm_rubric()  # an official task's sentences too (issue #51)
    prompt = VALIDITY_PROMPT.format(
        title=meta.title, context=meta.context,
        target=f"{meta.target.name} ({meta.target.unit}): {meta.target.description}",
        inputs="\n".join(f"- {v.name} ({v.unit}), range [{v.min:g}, {v.max:g}]: "
                         f"{v.description}" for v in meta.inputs),
        source=source,
        items="\n".join(f"- {it['id']}: {it.get('description', '')}" for it in items))
    return prompt, [it["id"] for it in items]


def structure_prompt(task: Task, source: str) -> str:
    """The structure question: the submission beside the hidden law and the
    published law it varies."""
    law = task.hidden_law()
    base = next(r for r in task.references() if r.name == law.base_reference)
    return STRUCTURE_PROMPT.format(inputs=", ".join(task.meta.input_names), hidden=law.expr,
                                   base=base.expr, source=source)


def _post(cfg: LLMConfig, prompt: str) -> str:
    return chat.content(chat.completion(cfg.base_url, cfg.key, {
        "model": cfg.model, "messages": [
            {"role": "system", "content": "You are a careful scientific referee. Answer in JSON."},
            {"role": "user", "content": prompt}], "max_completion_tokens": 2048}, cfg.timeout))


def _json_object(text: str) -> dict:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("no JSON object in the reply")
    doc = json.loads(text[start:end + 1])
    if not isinstance(doc, dict):
        raise ValueError("the reply is not a JSON object")
    return doc


def parse_validity(text: str, item_ids: list[str]) -> list[dict[str, Any]]:
    doc = _json_object(text)
    items = doc.get("items")
    if not isinstance(items, list):
        raise ValueError("'items' must be a list")
    got = {}
    for it in items:
        if not isinstance(it, dict) or not isinstance(it.get("passed"), bool):
            raise ValueError("each item needs a boolean 'passed'")
        got[str(it.get("item_id"))] = {"passed": it["passed"],
                                       "evidence": str(it.get("evidence", ""))[:500]}
    missing = [i for i in item_ids if i not in got]
    if missing:
        raise ValueError(f"no verdict for items {missing}")
    return [{"item_id": i, **got[i]} for i in item_ids]


def parse_structure(text: str) -> dict[str, Any]:
    doc = _json_object(text)
    level = doc.get("level")
    if not isinstance(level, (int, float)) or float(level) not in LEVELS:
        raise ValueError(f"'level' must be one of {LEVELS}")
    return {"level": float(level),
            "matched": [str(x) for x in doc.get("matched", []) if isinstance(x, str)],
            "missed": [str(x) for x in doc.get("missed", []) if isinstance(x, str)],
            "explanation": str(doc.get("explanation", ""))[:1000]}


async def ask_json(cfg: LLMConfig, prompt: str, parse: Callable[[str], T]
                   ) -> tuple[T | None, list[str]]:
    """(parsed verdict or None, the raw replies): one retry on a malformed reply."""
    raws: list[str] = []
    for attempt in range(2):
        try:
            text = await asyncio.to_thread(_post, cfg, prompt if attempt == 0 else prompt + (
                "\n\nYour previous reply could not be parsed: reply with the JSON object only."))
        except (urllib.error.URLError, TimeoutError, OSError, ValueError, KeyError,
                IndexError) as err:
            raise LLMJudgeUnavailable(f"the judge model endpoint failed: {err}") from None
        raws.append(text)
        try:
            return parse(text), raws
        except (ValueError, json.JSONDecodeError):
            continue
    return None, raws
