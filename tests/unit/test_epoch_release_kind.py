"""Issue #50 (5): a leaderboard release needs its secrets. Opening an epoch on a
library where some Parallel world has no private piece is refused unless the
operator says it is a development epoch; the library's kind reaches GetTask, the
Epoch messages and the leaderboard's title; `lawlab epoch open` says what the
ledger does (budgets are not renewed)."""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from lawlab.rpc.errors import FailedPrecondition
from lawlab.simulator.v1 import operator_pb2 as op
from lawlab.tasks.library import TaskLibrary
from lawlab.worlds.worldkey import WorldKey, public


def _library(root: Path, private: dict[str, bool], fingerprint: str) -> TaskLibrary:
    root.mkdir(parents=True)
    (root / "SUITE.json").write_text(json.dumps({"world_fingerprint": fingerprint}))
    for task_id, has_private in private.items():
        (root / task_id / "simulator").mkdir(parents=True)
        (root / task_id / "metadata.yaml").write_text(f"task_id: {task_id}\n")
        pieces = [{"id": "public_piece", "private": False}]
        if has_private:
            pieces.append({"id": "secret_piece", "private": True})
        (root / task_id / "simulator" / "world.json").write_text(
            json.dumps({"law": {"pieces": pieces}}))
    return TaskLibrary.__new__(TaskLibrary)


class _Task:
    """A built task as far as its world's pieces go (metadata is not parsed)."""

    def __init__(self, root: Path) -> None:
        self.root, self.task_id = root, root.name

    def has_world(self) -> bool:
        return (self.root / "simulator" / "world.json").exists()

    def world_spec(self) -> dict:
        return dict(json.loads((self.root / "simulator" / "world.json").read_text()))


def _lib(tmp_path: Path, private: dict[str, bool], fingerprint: str = "0123456789abcdef"):
    """A TaskLibrary over fake worlds."""
    root = tmp_path / "tasks"
    lib = _library(root, private, fingerprint)
    lib.root = root
    lib._tasks = {t: _Task(root / t) for t in private}  # type: ignore[misc]
    return lib


def test_the_kind_of_a_library(tmp_path):
    assert _lib(tmp_path / "a", {"t1": True, "t2": True}).kind == "leaderboard"
    some = _lib(tmp_path / "b", {"t1": True, "t2": False})
    assert some.kind == "development" and some.without_private() == ["t2"]
    # the public key's worlds are published whatever their pieces
    assert _lib(tmp_path / "c", {"t1": True}, public().fingerprint).kind == "development"
    assert WorldKey.generate().fingerprint != public().fingerprint


def _servicer(tmp_path: Path, library: TaskLibrary):
    from lawlab_simulator.auth import _CALLER, Identity
    from lawlab_simulator.operators import OperatorServicer
    from lawlab_simulator.store import open_store

    store = open_store(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    _CALLER.set(Identity(team="ops", role="operator"))
    return OperatorServicer(store, tmp_path / "subs", library), store


def test_an_epoch_on_a_development_library_needs_development(tmp_path):
    library = _lib(tmp_path, {"t1": True, "t2": False})
    servicer, store = _servicer(tmp_path, library)
    with pytest.raises(FailedPrecondition, match=r"development release.*t2.*--development"):
        asyncio.run(servicer.OpenEpoch(op.OpenEpochRequest(epoch_id="r1"), None))
    assert store.epochs.get("r1") is None
    epoch = asyncio.run(servicer.OpenEpoch(op.OpenEpochRequest(epoch_id="r1",
                                                               development=True), None))
    assert epoch.current and epoch.release_kind == "development"
    listed = asyncio.run(servicer.ListEpochs(op.ListEpochsRequest(), None)).epochs
    assert {e.release_kind for e in listed} == {"development"}
    assert any("kind=development" in a.detail for a in store.audit.entries(None, None, 100))
    # a malformed id is still INVALID_ARGUMENT, whatever the library
    from lawlab.rpc.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        asyncio.run(servicer.OpenEpoch(op.OpenEpochRequest(epoch_id="a b"), None))
    store.close()


def test_a_leaderboard_library_opens_without_the_flag(tmp_path):
    servicer, store = _servicer(tmp_path, _lib(tmp_path, {"t1": True, "t2": True}))
    epoch = asyncio.run(servicer.OpenEpoch(op.OpenEpochRequest(epoch_id="r1"), None))
    assert epoch.release_kind == "leaderboard"
    store.close()


def test_get_task_carries_the_kind(tmp_path):
    from lawlab_simulator.servicer import SimulatorServicer

    library = _lib(tmp_path, {"t1": False})
    fake = SimpleNamespace(library=library, _task=lambda task_id: SimpleNamespace(
        meta=None, group_ids=[], has_world=lambda: True))
    import lawlab_simulator.servicer as mod

    real = mod.convert.meta_to_proto
    mod.convert.meta_to_proto = lambda *a: None  # type: ignore[assignment]
    try:
        resp = asyncio.run(SimulatorServicer.GetTask(fake, SimpleNamespace(task_id="t1"), None))
    finally:
        mod.convert.meta_to_proto = real  # type: ignore[assignment]
    assert resp.release_kind == "development"


def test_the_epoch_message_matches_the_ledger(capsys):
    from lawlab_ops.cli.operators import _epoch_verb

    sent = {}

    class Api:
        def OpenEpoch(self, request, timeout):  # noqa: N802
            sent["request"] = request
            return op.Epoch(epoch_id=request.epoch_id, release=op.RELEASE_ON_CLOSE,
                            release_real=op.RELEASE_IMMEDIATE, release_kind="development")

    args = argparse.Namespace(verb="open", epoch_id="r2", release="on-close",
                              release_real="immediate", development=True)
    assert _epoch_verb(Api(), args) == 0
    out = capsys.readouterr().out
    assert sent["request"].development
    assert "afresh" not in out and "NOT renewed" in out and "development release" in out


def test_the_leaderboard_says_which_kind_it_ranks():
    from lawlab_ops.cli.leaderboard import release_note

    assert "not a leaderboard's" in release_note("development")
    assert release_note("leaderboard").startswith("Release: leaderboard")


def test_make_tasks_says_when_a_library_has_no_private_variants(tmp_path):
    from lawlab_ops.cli.tasks import private_note

    missing = private_note(tmp_path / "world-variants.yaml", public=False)
    assert "NO PRIVATE VARIANTS" in missing and "DEVELOPMENT" in missing \
        and "--development" in missing
    assert "--development" in private_note(tmp_path / "world-variants.yaml", public=True)
    (tmp_path / "world-variants.yaml").write_text("{}\n")
    assert "join the keyed draw" in private_note(tmp_path / "world-variants.yaml", public=False)


def test_the_example_private_variants_file_parses_and_says_it_is_an_example():
    from lawlab.tasks.specs import SPECS
    from lawlab.worlds import mechanisms

    path = Path(__file__).resolve().parents[2] / "docs" / "examples" / "world-variants.EXAMPLE.yaml"
    assert path.read_text().startswith("# EXAMPLE ONLY - DO NOT USE THIS FILE FOR A LEADERBOARD")
    loaded = mechanisms.load_private(path)
    for task_id, raw in loaded.items():
        spec = next(s for s in SPECS if s.task_id == task_id)
        names = {r.name: [*r.global_names, *r.local_names] for r in spec.references}
        parsed = mechanisms.parse_catalogue(raw, task_id, [v["name"] for v in spec.inputs], names,
                                            private=True)
        assert parsed and all(v.private for v in parsed)
