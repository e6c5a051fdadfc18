"""What a person sees in a figure, checked: every piece of text inside the figure
(not clipped at its edge) and no two pieces of text overlapping (issue #52: Fig.
4a's pair counts sat on the tick labels and were cut off at the bottom)."""

from __future__ import annotations

from typing import Any


def _texts(fig: Any) -> list[tuple[str, Any]]:
    """(label, bounding box in display pixels) of every visible, non-empty text."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    # tick labels of ticks outside the view are never drawn
    hidden = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            eps = 1e-9 * max(1.0, abs(hi - lo))
            for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
                if not lo - eps <= tick.get_loc() <= hi + eps:
                    hidden |= {id(tick.label1), id(tick.label2)}
    out = []
    for artist in fig.findobj():
        if type(artist).__name__ not in ("Text", "Annotation") or id(artist) in hidden:
            continue
        text = artist.get_text().strip()
        if not text or not artist.get_visible():
            continue
        box = artist.get_window_extent(renderer)
        if box.width <= 0 or box.height <= 0:
            continue
        out.append((text.replace("\n", " / "), box))
    return out


def layout_defects(fig: Any, slack: float = 1.0) -> list[str]:
    """Text cut off at the figure's edge, and pairs of texts that overlap by more
    than ``slack`` pixels each way."""
    width, height = fig.canvas.get_width_height()
    found = []
    texts = _texts(fig)
    for label, box in texts:
        if box.x0 < -slack or box.y0 < -slack or box.x1 > width + slack or \
                box.y1 > height + slack:
            found.append(f"clipped: {label!r} at {box.bounds} in a {width}x{height} figure")
    for i, (a, ba) in enumerate(texts):
        for b, bb in texts[i + 1:]:
            dx = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
            dy = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
            if dx > slack and dy > slack:
                found.append(f"overlap: {a!r} and {b!r}")
    return found
