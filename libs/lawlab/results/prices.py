"""What model tokens cost, from a price list the user keeps (lawlab ships none:
prices change and differ by contract). A YAML or JSON mapping of a model's name,
as the reports print it (``provider/model``), to US dollars per million tokens:

    openai/gpt-4o: {prompt: 2.50, completion: 10.00}
    openai/o3-mini: {prompt: 1.10, completion: 4.40}

``LAWLAB_PRICES`` names the file for the pages (``lawlab up``, ``lawlab view``);
``lawlab report --prices FILE`` and ``lawlab view --prices FILE`` take it too. A
model without a price has no cost (shown as a dash, never as 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path


class PriceListError(ValueError):
    """A price list that cannot be read; the message names the file and entry."""


@dataclass(frozen=True)
class Price:
    prompt: float  # USD per million prompt tokens
    completion: float  # USD per million completion tokens

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1e6


def load(path: str | Path) -> dict[str, Price]:
    import yaml

    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as err:
        raise PriceListError(f"cannot read the price list {p}: {err.strerror}") from None
    except yaml.YAMLError as err:
        raise PriceListError(f"the price list {p} is not YAML or JSON: {err}") from None
    if not isinstance(doc, dict):
        raise PriceListError(f"the price list {p} must map model names to "
                             "{prompt: USD per 1M tokens, completion: USD per 1M tokens}")
    out = {}
    for name, entry in doc.items():
        if not isinstance(entry, dict) or set(entry) != {"prompt", "completion"}:
            raise PriceListError(f"{p}: {name!r} needs exactly prompt and completion (US "
                                 "dollars per million tokens)")
        values = []
        for key in ("prompt", "completion"):
            v = entry[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                    or v < 0:
                raise PriceListError(f"{p}: {name!r}.{key} must be a number >= 0, not {v!r}")
            values.append(float(v))
        out[str(name)] = Price(*values)
    return out


def cost(prices: dict[str, Price] | None, model: str, prompt_tokens: int,
         completion_tokens: int) -> float | None:
    """The cost in US dollars; 0 for no tokens (a built-in agent); None when the list
    has no price for ``model``."""
    if prices is not None and prompt_tokens == 0 and completion_tokens == 0:
        return 0.0
    price = (prices or {}).get(model)
    return None if price is None else price.cost(prompt_tokens, completion_tokens)


def dollars(x: float | None) -> str:
    if x is None:
        return "-"
    return f"${x:,.2f}" if x >= 0.995 or x == 0 else f"${x:.4f}"
