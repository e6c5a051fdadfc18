"""The k nearest records of a point, defined without reference to any library's
search structure (docs/protocol.md, section 5).

A world's noise at ``x`` is drawn from the residuals of the ``k`` pool records
nearest to ``x``. Which records those are, and in what order a draw sees them,
fixes the noise stream, so it is defined here exactly:

- distance is the squared Euclidean distance in the world's standardized
  coordinates, computed in float64 as the sum of ``(x_i - q_i) * (x_i - q_i)``
  over the inputs in order (a product, correctly rounded everywhere; a scalar
  ``pow`` is not);
- records at equal distance are taken lowest pool row first;
- the chosen rows are listed in ascending pool row.

A k-d tree breaks ties in its own traversal order, which a library release can
change; real records repeat (replicates, dose levels), so ties are common and
the stream would then depend on the installed scipy.

One input (38 of the 41 worlds): two sorted views of the pool and a window on
each side of the point, ``O(n (k + R))`` for ``n`` points, where ``R`` is the
largest number of records sharing one value: a run of replicates tied at the
k-th distance then lies inside the window. A window whose next row out is not
strictly farther than the k-th distance (distinct values that round to one
distance) is redone by the exhaustive search. Several inputs: the exhaustive
search, ``O(n N)`` for a pool of ``N`` rows, in chunks.
"""

from __future__ import annotations

import numpy as np

CHUNK_CELLS = 1 << 20  # point-record pairs the exhaustive search holds at once


def select(dist: np.ndarray, rows: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per line of ``dist`` (candidates' distances, ``inf`` for none) the ``k``
    candidates nearest, equal distances lowest row first: their rows ascending,
    and the k-th distance. ``rows`` holds distinct pool rows per line."""
    kth = np.partition(dist, k - 1, axis=1)[:, k - 1:k]
    take = dist < kth
    tied = dist == kth
    need = k - take.sum(axis=1)
    over = np.flatnonzero(tied.sum(axis=1) > need)
    if len(over):
        # more rows at the k-th distance than places: the lowest rows win
        key = np.where(tied[over], rows[over], np.iinfo(np.int64).max)
        last = np.take_along_axis(np.sort(key, axis=1), need[over, None] - 1, axis=1)
        tied[over] &= rows[over] <= last
    chosen = rows[take | tied].reshape(len(dist), k)
    return np.sort(chosen, axis=1), kth[:, 0]


class Neighbours:
    """The k-nearest search over one pool of standardized coordinates (``N`` x d)."""

    def __init__(self, coords: np.ndarray) -> None:
        self.coords = np.asarray(coords, dtype=float)
        if self.coords.ndim != 2 or not len(self.coords):
            raise ValueError("coords must be a non-empty N x d array")
        self.one_input = self.coords.shape[1] == 1
        if self.one_input:
            n_pool = len(self.coords)
            value, row = self.coords[:, 0], np.arange(n_pool)
            # ties in value: nearest-first is row ascending on both sides, so the
            # right side is sorted by (value, row), the left by (value, -row);
            # each padded by n_pool + 1 sentinels (infinitely far, rows < 0)
            pad = n_pool + 1
            right, left = np.lexsort((row, value)), np.lexsort((-row, value))
            self.left_value = np.concatenate([np.full(pad, -np.inf), value[left]])
            self.left_row = np.concatenate([-1 - np.arange(pad), left])
            self.right_value = np.concatenate([value[right], np.full(pad, np.inf)])
            self.right_row = np.concatenate([right, -1 - pad - np.arange(pad)])
            # the longest run of one value: how far past the k-th row a tie can reach
            self.run = int(np.unique(value, return_counts=True)[1].max())

    def query(self, points: np.ndarray, k: int) -> np.ndarray:
        """Pool rows of the ``k`` nearest records of each point (n x d), n x k."""
        q = np.asarray(points, dtype=float)
        d = self.coords.shape[1]
        if q.ndim != 2 or q.shape[1] != d:
            raise ValueError(f"points must be an n x {d} array, got shape {q.shape}")
        if not np.isfinite(q).all():
            raise ValueError("points must be finite (clip them to the world's support first)")
        if not 1 <= k <= len(self.coords):
            raise ValueError(f"k must be in 1..{len(self.coords)}, got {k}")
        with np.errstate(over="ignore"):  # distances past 1e154 are inf: ties, as defined
            return self._window(q, k) if self.one_input else self.exhaustive(q, k)

    def exhaustive(self, q: np.ndarray, k: int) -> np.ndarray:
        """The definition itself: every pool row's distance to every point
        (``q``: finite, n x d)."""
        n_pool = len(self.coords)
        out = np.empty((len(q), k), dtype=np.int64)
        step = max(1, CHUNK_CELLS // n_pool)
        rows = np.broadcast_to(np.arange(n_pool), (min(step, len(q)), n_pool))
        for lo in range(0, len(q), step):
            part = q[lo:lo + step]
            diff = self.coords[None, :, :] - part[:, None, :]
            dist = (diff * diff).sum(axis=-1)
            out[lo:lo + step] = select(dist, rows[:len(part)], k)[0]
        return out

    def _window(self, q: np.ndarray, k: int) -> np.ndarray:
        x, pad = q[:, 0], len(self.coords) + 1
        width = min(k + self.run - 1, len(self.coords))
        # left: rows with value < x, the nearest ``width`` at [start, start + width),
        # farthest first; right: value >= x, nearest first from its start
        left = np.searchsorted(self.left_value, x, "left") - width
        right = np.searchsorted(self.right_value[:-pad], x, "left")
        window = np.lib.stride_tricks.sliding_window_view
        rows = np.concatenate([window(self.left_row, width)[left],
                               window(self.right_row, width)[right]], axis=1)
        diff = np.concatenate([window(self.left_value, width)[left],
                               window(self.right_value, width)[right]], axis=1) - x[:, None]
        near, kth = select(diff * diff, rows, k)
        # the window is enough where the next row out on each side is strictly
        # farther than the k-th nearest (distances only grow outwards)
        out_left = self.left_value[left - 1] - x
        out_right = self.right_value[right + width] - x
        beyond = np.minimum(out_left * out_left, out_right * out_right)
        redo = np.flatnonzero(beyond <= kth)
        if len(redo):
            near[redo] = self.exhaustive(q[redo], k)
        return near
