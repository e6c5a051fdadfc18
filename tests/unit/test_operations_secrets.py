"""Issue #50 (7), the smaller items: answer keys and uploaded trajectories readable by
their owner only; a token for an existing team needs the internal token; the
catalogue counts no private variant."""

from __future__ import annotations

import asyncio
import json
import shutil
import stat
from pathlib import Path

import pytest

from lawlab.rpc.errors import PermissionDenied
from lawlab.simulator.v1 import operator_pb2 as op


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_answer_keys_are_readable_by_their_owner_only(tmp_path, tasks_dir):
    from lawlab_ops.taskbuild.build import protect_answer_keys

    task = next(p.parent.parent for p in sorted(Path(tasks_dir).glob("*/simulator/world.json")))
    copy = tmp_path / "tasks" / task.name
    shutil.copytree(task, copy)
    for p in copy.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    assert protect_answer_keys(tmp_path / "tasks") >= 4
    for rel in ("simulator/world.json", "simulator/residuals.npz", "eval/synthesis.json"):
        assert _mode(copy / rel) == 0o600, rel
    assert _mode(copy / "simulator") == 0o700
    tests = list((copy / "data").glob("test*.csv"))
    assert tests and all(_mode(p) == 0o600 for p in tests)
    # what a solver is given stays readable
    assert _mode(copy / "data" / "train.csv") == 0o644 and _mode(copy / "metadata.yaml") == 0o644


def test_an_uploaded_trajectory_is_the_simulators_only(tmp_path):
    from lawlab_simulator.submissions import write_trajectory

    path = Path(write_trajectory(tmp_path, "sub-1", ['{"type": "turn"}']))
    assert _mode(path) == 0o600 and _mode(path.parent) == 0o700
    assert path.read_text() == '{"type": "turn"}\n'


def test_a_token_for_an_existing_team_needs_the_internal_token(tmp_path):
    from lawlab_simulator.auth import _CALLER, Identity
    from lawlab_simulator.operators import OperatorServicer
    from lawlab_simulator.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    servicer = OperatorServicer(store)
    _CALLER.set(Identity(team="ops", role="operator"))
    made = asyncio.run(servicer.CreateToken(op.CreateTokenRequest(team="acme"), None))
    assert made.token
    with pytest.raises(PermissionDenied, match="internal token"):
        asyncio.run(servicer.CreateToken(op.CreateTokenRequest(team="acme"), None))
    _CALLER.set(Identity(team="lawlab", role="internal"))
    assert asyncio.run(servicer.CreateToken(op.CreateTokenRequest(team="acme"), None)).token
    store.close()


def test_the_catalogue_counts_no_private_variant(tmp_path, tasks_dir):
    from lawlab_ops.taskbuild.catalogue import WORLDS_HEADING, catalogue

    task = next(p.parent.parent for p in sorted(Path(tasks_dir).glob("*/simulator/world.json")))
    root = tmp_path / "tasks"
    shutil.copytree(task, root / task.name)
    for name in ("SUITE.json", "lsr_funnel.json"):
        if (Path(tasks_dir) / name).exists():
            shutil.copy(Path(tasks_dir) / name, root / name)

    def row() -> str:
        text = catalogue(root)
        section = text[text.index(WORLDS_HEADING):]
        return next(line for line in section.splitlines() if f"`{task.name}`" in line)

    before = row()
    synthesis = root / task.name / "eval" / "synthesis.json"
    rec = json.loads(synthesis.read_text())
    secret = {**rec["catalogue"][0], "id": "operators_secret", "private": True}
    rec["catalogue"].append(secret)
    rec["admissible"].append("operators_secret")
    synthesis.write_text(json.dumps(rec))
    assert row() == before
