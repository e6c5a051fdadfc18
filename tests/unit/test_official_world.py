"""Issue #51: the official Parallel worlds. Where an official task folder has a
``simulator/state.joblib``, the imported task serves that world as published: the
pickle is read only inside a sandbox box (real bubblewrap), the hidden law becomes
a restricted expression, the constants, support, noise scale and residual pools are
the state's, and the judge scores against that hidden law. Fixtures:
tests/support/official_state.py (the harness's state layout, made from lawlab's own
fixture tasks)."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import stat
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest

from lawlab.judging import structure
from lawlab.tasks.library import Task
from lawlab.worlds.world import World
from lawlab_ops.taskbuild.importer import import_all
from tests.support.official import FIXTURES, release_view
from tests.support.official_state import (
    BASELINE,
    CULTURE,
    HIDDEN,
    NOISE_SCALE,
    ORBIT,
    STATE_CONSTANTS,
    culture_params,
    hidden_predict,
    write_state,
)

KIND = {ORBIT: "typeI", CULTURE: "typeII"}


def _boxes_run() -> bool:
    return bool(shutil.which("bwrap")) and (os.geteuid() != 0 or bool(shutil.which("setpriv")))


pytestmark = pytest.mark.skipif(not _boxes_run(), reason="bubblewrap is installed by make install")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The release view of the two fixtures with official states (not tripwires)."""
    root = tmp_path_factory.mktemp("official_worlds")
    hf = release_view(root / "hf", root / "unused-marker")
    states = {t: write_state(t, hf / "tasks" / KIND[t] / t) for t in KIND}
    return hf, states


@pytest.fixture(scope="module")
def imported(release, tmp_path_factory):
    hf, _ = release
    out = tmp_path_factory.mktemp("official_worlds_out")
    reports = {r.task_id: r for r in import_all(hf, out, formulas=FIXTURES)}
    return out, reports


def test_the_state_is_read_in_a_box_and_the_world_served(imported):
    out, reports = imported
    for task_id in KIND:
        r = reports[task_id]
        assert r.ok, (r.error, r.problems)
        assert any(c.startswith("Parallel world simulator/state.joblib (read in a sandbox box)")
                   for c in r.converted), r.converted + r.unconvertible
        task = Task(out / task_id)
        assert task.has_world() and task.world_spec()["official"]["source"] == \
            "simulator/state.joblib"
        for name in ("world.json", "residuals.npz"):  # answer keys: the owner's only
            assert stat.S_IMODE((out / task_id / "simulator" / name).stat().st_mode) == 0o600
        assert not (out / task_id / "simulator" / "state.joblib").exists()


def test_the_served_law_is_the_states_law_with_its_constants(imported, release):
    out, _ = imported
    _, states = release
    orbit = Task(out / ORBIT)
    world = World(orbit.world_spec(), orbit.world_arrays())
    x = orbit.train[["a_AU", "e"]].to_numpy(float)
    mean = world.mean({"a_AU": x[:, 0], "e": x[:, 1]}, None)
    want = hidden_predict(ORBIT, x, **STATE_CONSTANTS[ORBIT])  # not the module's c4 = 0
    assert np.allclose(mean, want, rtol=1e-12)
    assert world.s == {"_all": NOISE_SCALE}
    culture = Task(out / CULTURE)
    world = World(culture.world_spec(), culture.world_arrays())
    params = culture_params(culture.train)
    assert world.constants == {"b": BASELINE}
    for g, rows in culture.train.groupby("group_id"):
        t = rows["time_h"].to_numpy(float)
        got = world.mean({"time_h": t}, [str(g)] * len(t))
        assert np.allclose(got, hidden_predict(CULTURE, t[:, None], **params[str(g)]),
                           rtol=1e-9)
    assert set(world.groups) == set(states[CULTURE]["groups"])


def test_the_worlds_noise_is_the_states_residuals_scaled(imported, release):
    """Observations minus the law: draws from the state's residual pool (near each
    point) times its noise scale; their spread matches the pool's at the records."""
    out, _ = imported
    _, states = release
    orbit = Task(out / ORBIT)
    world = World(orbit.world_spec(), orbit.world_arrays())
    arrays = orbit.world_arrays()
    assert np.array_equal(arrays["residuals"], states[ORBIT]["bootstrap"]._res)
    x = orbit.train[["a_AU", "e"]]
    points = {c: np.tile(x[c].to_numpy(float), 20) for c in x.columns}
    y = world.sample(points, None, np.random.default_rng(1))
    noise = y - world.mean(points, None)
    ratio = noise.std() / (NOISE_SCALE * states[ORBIT]["bootstrap"]._res.std())
    assert 0.7 < ratio < 1.3, ratio


def test_the_judge_scores_against_the_official_hidden_law(imported):
    out, _ = imported
    for task_id in KIND:
        task = Task(out / task_id)
        hidden = structure.hidden_law_of(task.world_spec(), task.meta.input_names)
        assert hidden.base is not None  # the published reference it varies
        law = HIDDEN[task_id]
        if task_id == ORBIT:
            law = law.replace('"c4": 0.0', '"c4": 0.3')
        full = structure.judge_structure(law, hidden)
        assert full.level == 1.0, full.explanation
        base_name = task.world_spec()["law"]["base_reference"]
        base_module = next(r.module for r in task.references() if r.name == base_name)
        assert structure.judge_structure(base_module, hidden).level <= 0.5


def test_the_pickle_is_never_opened_in_this_process(release, tmp_path, monkeypatch):
    """Every way this process could unpickle is a tripwire; the world is still read
    (so it was read elsewhere: in the box)."""
    hf, _ = release

    def refuse(*args, **kwargs):
        raise AssertionError("unpickled in the importer's process")

    for owner, name in ((pickle, "load"), (pickle, "loads"), (pickle, "Unpickler"),
                        (joblib, "load")):
        monkeypatch.setattr(owner, name, refuse)
    [r] = import_all(hf / "tasks" / "typeI" / ORBIT, tmp_path / "out", formulas=FIXTURES)
    assert r.ok and any(c.startswith("Parallel world") for c in r.converted), r.unconvertible


class _Writes:
    """Unpickling this writes a file at ``path`` (a hostile state)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.write_text, (Path(self.path), "pwned"))


def test_a_hostile_state_runs_in_the_box_and_touches_nothing_here(release, tmp_path):
    hf, _ = release
    task = tmp_path / ORBIT
    shutil.copytree(hf / "tasks" / "typeI" / ORBIT, task)
    marker = tmp_path / "marker"
    (task / "simulator" / "state.joblib").write_bytes(pickle.dumps({"x": _Writes(str(marker))}))
    [r] = import_all(task, tmp_path / "out", formulas=FIXTURES)
    assert not marker.exists()
    assert r.ok, r.problems  # the task imports, without a world
    assert any("Parallel world simulator/state.joblib: reading it in the sandbox ended with "
               "error" in u for u in r.unconvertible), r.unconvertible
    assert not Task(tmp_path / "out" / ORBIT).has_world()


def test_a_state_with_missing_pieces_is_refused_naming_them(release, tmp_path):
    hf, states = release
    task = tmp_path / ORBIT
    shutil.copytree(hf / "tasks" / "typeI" / ORBIT, task)
    state = dict(states[ORBIT])
    state["law_constants"] = {"c2": 0.5}  # c4 has no value anywhere but the module's default
    state["bootstrap"] = {"not": "a bootstrap"}
    joblib.dump(state, task / "simulator" / "state.joblib")
    [r] = import_all(task, tmp_path / "out", formulas=FIXTURES)
    assert any("bootstrap is not the harness's ResidualBootstrap" in u for u in r.unconvertible), \
        r.unconvertible
    assert not Task(tmp_path / "out" / ORBIT).has_world()


def test_world_json_holds_numbers_and_text_only(imported):
    out, _ = imported
    for task_id in KIND:
        text = (out / task_id / "simulator" / "world.json").read_text()
        json.loads(text)  # strict JSON: no NaN, no objects
        assert "ResidualBootstrap" not in text and "pwned" not in text
        frame = pd.read_csv(out / task_id / "data" / "train.csv")
        assert len(frame) > 0


def test_a_hidden_law_without_a_state_gets_a_world_from_lawlabs_builder(release, tmp_path):
    """simulator/formula.py alone: lawlab's builder fits the hidden law on the imported
    records and serves it with its own calibrated noise; the judge scores against it."""
    hf, _ = release
    task_dir = tmp_path / ORBIT
    shutil.copytree(hf / "tasks" / "typeI" / ORBIT, task_dir)
    (task_dir / "simulator" / "state.joblib").unlink()
    [r] = import_all(task_dir, tmp_path / "out", formulas=FIXTURES)
    assert r.ok, (r.error, r.problems)
    assert any(c.startswith("Parallel world from simulator/formula.py (no state.joblib) -> "
                            "made by lawlab's builder") for c in r.converted), r.converted
    task = Task(tmp_path / "out" / ORBIT)
    spec = task.world_spec()
    assert spec["official"]["source"] == "simulator/formula.py"
    assert spec.get("draw", "smoothed") == "smoothed" and set(spec["law"]["constants"]) == \
        {"c2", "c4"}
    world = World(spec, task.world_arrays())
    x = task.train[["a_AU", "e"]]
    y = world.sample({c: x[c].to_numpy(float) for c in x.columns}, None,
                     np.random.default_rng(3))
    assert np.all(np.isfinite(y))
    hidden = structure.hidden_law_of(spec, task.meta.input_names)
    law = HIDDEN[ORBIT].replace('"c2": 0.5, "c4": 0.0', ", ".join(
        f'"{k}": {v!r}' for k, v in spec["law"]["constants"].items()))
    assert structure.judge_structure(law, hidden).level == 1.0
