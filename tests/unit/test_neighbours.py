"""The nearest records of a point (lawlab.worlds.neighbours): the one-input window and the
exhaustive search both give exactly the definition (squared distance, then the
lowest pool row; rows listed ascending), on pools with repeated values, points
on the records, points midway between two records and points beyond the pool."""

from __future__ import annotations

import numpy as np
import pytest

from lawlab.worlds.neighbours import Neighbours


def definition(coords: np.ndarray, points: np.ndarray, k: int) -> np.ndarray:
    """Sort every record by (squared distance, row) and keep the first k, ascending."""
    diff = coords[None, :, :] - points[:, None, :]
    dist = (diff * diff).sum(axis=-1)
    row = np.broadcast_to(np.arange(len(coords)), dist.shape)
    return np.sort(np.lexsort((row, dist), axis=-1)[:, :k], axis=1)


def pools(rng: np.random.Generator, dims: int):
    for _ in range(60):
        n = int(rng.integers(1, 250))
        coords = rng.normal(size=(n, dims))
        yield coords                                                   # distinct values
        yield coords[rng.integers(0, max(1, n // 4), n)]               # replicates
        yield np.round(coords * 2) / 2                                 # a coarse design


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_the_search_is_the_definition(dims):
    rng = np.random.default_rng(dims)
    checked = ties = 0
    for coords in pools(rng, dims):
        n = len(coords)
        points = np.concatenate([
            rng.normal(size=(40, dims)),
            coords[rng.integers(0, n, 15)],                            # on a record
            (coords[rng.integers(0, n, 15)] + coords[rng.integers(0, n, 15)]) / 2,  # midway
            rng.normal(size=(5, dims)) * 50])                          # far outside
        search = Neighbours(coords)
        for k in sorted({1, n, int(rng.integers(1, n + 1))}):
            got = search.query(points, k)
            assert got.shape == (len(points), k)
            np.testing.assert_array_equal(got, definition(coords, points, k))
            np.testing.assert_array_equal(search.exhaustive(points, k), got)
            checked += 1
            dist = ((coords[None] - points[:, None]) ** 2).sum(-1)
            kth = np.sort(dist, axis=1)[:, k - 1:k]
            ties += int(((dist == kth).sum(axis=1) > 1).sum())
    # the pools exercise what the definition is for: ties at the k-th distance
    assert checked > 100 and ties > 1000


def test_ties_go_to_the_lowest_rows():
    """Twelve replicates at each of 8 levels, shuffled: a point between two levels
    reaches 12 + 8 of 24 tied records at k = 20; the 8 are the lowest rows of the
    farther level."""
    rng = np.random.default_rng(0)
    levels = np.repeat([0.1, 0.3, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0], 12)
    coords = levels[rng.permutation(96)][:, None]
    got = Neighbours(coords).query(np.array([[1.4]]), 20)[0]    # 1.0 nearer than 2.0
    at_1, at_2 = np.flatnonzero(coords[:, 0] == 1.0), np.flatnonzero(coords[:, 0] == 2.0)
    np.testing.assert_array_equal(got, np.sort(np.concatenate([at_1, at_2[:8]])))
    points = rng.uniform(0, 16, (500, 1))
    np.testing.assert_array_equal(Neighbours(coords).query(points, 20),
                                  definition(coords, points, 20))


def by_hand(coords: np.ndarray, points: np.ndarray, k: int) -> np.ndarray:
    """The definition in plain Python floats, one point at a time."""
    out = []
    for p in points.tolist():
        keyed = sorted((sum((a - b) * (a - b) for a, b in zip(rec, p)), row)
                       for row, rec in enumerate(coords.tolist()))
        out.append(sorted(row for _, row in keyed[:k]))
    return np.array(out)


def test_extreme_magnitudes_and_distances_that_round_together():
    """Values far apart in magnitude, signed zeros, and distinct values whose
    distances round to one float on the same side (1e16 and 1e16 + 2 seen from 0)."""
    coords = np.array([[1e16], [1e16 + 2], [-1e16], [0.0], [-0.0], [1e-300], [-1e-300],
                       [1e300], [1e16 + 2], [3.0], [0.1 + 0.2], [0.3]])
    points = np.array([[0.0], [-0.0], [1e16 + 1], [1e300], [-1e300], [0.15], [5e-324], [1e16]])
    search = Neighbours(coords)
    for k in range(1, len(coords) + 1):
        np.testing.assert_array_equal(search.query(points, k), by_hand(coords, points, k))


def test_runs_of_replicates_longer_than_k_stay_in_the_window(monkeypatch):
    """A longitudinal design (13 ages, 79 trees at each, as spruce_growth) ties far
    past the k-th row at every point; the window reaches past the longest run, so
    the exhaustive search is not needed, and the result is the definition."""
    rng = np.random.default_rng(3)
    coords = np.repeat(np.linspace(-1.5, 1.5, 13), 79)[rng.permutation(13 * 79)][:, None]
    points = np.concatenate([rng.uniform(-2, 2, (200, 1)), coords[:20]])
    search = Neighbours(coords)
    calls = []
    monkeypatch.setattr(search, "exhaustive", lambda q, k: calls.append(len(q)))
    got = search.query(points, 64)
    assert calls == []
    np.testing.assert_array_equal(got, definition(coords, points, 64))


def test_bad_arguments_say_what_is_wrong():
    search = Neighbours(np.zeros((5, 1)))
    with pytest.raises(ValueError, match="k must be in 1..5"):
        search.query(np.zeros((1, 1)), 6)
    with pytest.raises(ValueError, match="k must be in 1..5"):
        search.query(np.zeros((1, 1)), 0)
    with pytest.raises(ValueError, match="non-empty"):
        Neighbours(np.zeros((0, 1)))
    with pytest.raises(ValueError, match=r"n x 1 array, got shape \(3, 2\)"):
        search.query(np.zeros((3, 2)), 1)
    for bad in (np.nan, np.inf, -np.inf):
        with pytest.raises(ValueError, match="points must be finite"):
            search.query(np.array([[0.5], [bad]]), 2)
