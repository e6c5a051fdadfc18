"""Durations as a person reads them, one wording for the command line and the pages."""

from __future__ import annotations


def eta_text(seconds: float | None, unknown: str = "-") -> str:
    """Minutes and seconds under an hour ("0 min" said nothing with half a fast grid
    left), hours and minutes above, seconds alone under a minute; ``unknown`` when
    there is no estimate (0, negative or None)."""
    if not seconds or seconds <= 0:
        return unknown
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min" if h else f"{m} min {s:02d} s" if m else f"{s} s"
