"""The task model and loader for the on-disk layout of docs/protocol.md section 1.

``<task>/metadata.yaml`` and ``<task>/data/train.csv`` are solver-facing.
``<task>/data/test*.csv``, ``<task>/eval/`` and ``<task>/simulator/`` are
answer keys: only the simulator, scorer and judge call the loaders for them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from lawlab.vocab import Setting

GROUP_COL = "group_id"


@dataclass(frozen=True)
class Variable:
    name: str
    unit: str = ""
    description: str = ""
    symbol: str = ""
    min: float = float("nan")
    max: float = float("nan")

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Variable":
        return cls(
            name=str(d["name"]),
            unit=str(d.get("unit", "")),
            description=str(d.get("description", "")),
            symbol=str(d.get("symbol", "")),
            min=float(d.get("min", float("nan"))),
            max=float(d.get("max", float("nan"))),
        )

    def renamed(self, name: str) -> "Variable":
        return replace(self, name=name)


@dataclass(frozen=True)
class Caps:
    max_law_constants: int
    max_local_params: int
    fit_timeout_seconds: float = 10.0
    max_experiment_calls: int = 10
    max_points_per_call: int = 10
    min_samples_per_point: int = 1
    max_samples_per_point: int = 3
    max_turns: int = 30
    # starts a LOCAL_FITTABLE "init" list may hold (the official caps' field)
    max_init_size_per_param: int = 1


@dataclass(frozen=True)
class TaskMeta:
    task_id: str
    title: str
    discipline: str
    context: str
    target: Variable
    inputs: tuple[Variable, ...]
    multi_group: bool
    metric: str
    caps: Caps
    group_description: str = ""
    source: str = ""
    license: str = ""
    split_kind: str = ""
    split_rationale: str = ""
    suite: str = "real"  # real | lsr-transform | lsr-synth
    # an imported official task's candidate constants from the literature (distractors
    # among them), each one JSON object without the grader's "_role"; shown to solvers
    # as the paper's prompt shows them
    priors: tuple[str, ...] = ()

    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.inputs]

    @property
    def type_label(self) -> str:
        return "II" if self.multi_group else "I"

    def public(self, group_ids: tuple[str, ...] | list[str] = (),
               parallel: bool = False) -> SolverTask:
        """The task as a solver sees it: the one projection of this model that leaves
        the simulator (the catalogue's message is this, converted). Never the split's
        rationale; references, rubric, laws and data live elsewhere (Task)."""
        return SolverTask(
            task_id=self.task_id, title=self.title, discipline=self.discipline,
            context=self.context, target=self.target, inputs=self.inputs,
            multi_group=self.multi_group, caps=self.caps, metric=self.metric,
            group_ids=tuple(group_ids), group_description=self.group_description,
            source=self.source, license=self.license, suite=self.suite,
            settings=(Setting.REAL, Setting.PARALLEL) if parallel else (Setting.REAL,),
            priors=self.priors)


@dataclass(frozen=True)
class SolverTask:
    """A task as a solver sees it (TaskMeta.public, the one projection): what the
    simulator's catalogue shows (never references, rubric, laws or how the held-out
    data was split). The agent's policies, prompts, views and built-in agents read
    it; it is made from the catalogue's message once where a trial opens
    (convert.solver_task_from_proto), and the message from it
    (convert.solver_task_to_proto)."""

    task_id: str
    title: str
    discipline: str
    context: str
    target: Variable
    inputs: tuple[Variable, ...]
    multi_group: bool
    caps: Caps
    metric: str = "rmse"
    group_ids: tuple[str, ...] = ()
    group_description: str = ""
    source: str = ""
    license: str = ""
    suite: str = "real"
    settings: tuple[Setting, ...] = ()  # the settings the task supports
    priors: tuple[str, ...] = ()  # TaskMeta.priors

    @property
    def input_names(self) -> list[str]:
        return [v.name for v in self.inputs]


@dataclass(frozen=True)
class Reference:
    """A published formula in restricted-expression form, plus its contract module."""

    name: str
    citation: str
    expr: str
    global_names: tuple[str, ...]
    local_names: tuple[str, ...]
    init: dict[str, float]
    constants: dict[str, float]  # fitted on the training split
    module: str  # submission-contract source


@dataclass(frozen=True)
class HiddenLaw:
    expr: str
    constants: dict[str, float]
    local: dict[str, dict[str, float]] = field(default_factory=dict)
    base_reference: str = ""
    base_expr: str = ""
    added_terms: tuple[str, ...] = ()
    rationale: str = ""
    pieces: tuple[dict[str, Any], ...] = ()   # kind, description, constants, neutral, ...
    global_names: tuple[str, ...] = ()
    local_names: tuple[str, ...] = ()


def _priors(raw: dict[str, Any]) -> tuple[str, ...]:
    """official.priors of an imported task, each a JSON object without keys that
    start with "_" (the grader's ``_role``: which are distractors)."""
    official = raw.get("official")
    priors = official.get("priors") if isinstance(official, dict) else None
    if not isinstance(priors, list):
        return ()
    out = []
    for p in priors:
        if isinstance(p, dict):
            p = {str(k): v for k, v in p.items() if not str(k).startswith("_")}
        out.append(json.dumps(p, sort_keys=True, ensure_ascii=False, default=str))
    return tuple(out)


def public_fingerprint() -> str:
    from lawlab.worlds.worldkey import public

    return public().fingerprint


class Task:
    """One task directory. Public parts load eagerly; answer keys on demand."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        with open(self.root / "metadata.yaml") as fh:
            raw = yaml.safe_load(fh)
        self.raw_meta = raw
        caps = raw.get("caps", {})
        self.meta = TaskMeta(
            task_id=str(raw["task_id"]),
            title=str(raw.get("title", raw["task_id"])),
            discipline=str(raw.get("discipline", "")),
            context=str(raw.get("context", "")),
            target=Variable.from_dict(raw["target"]),
            inputs=tuple(Variable.from_dict(v) for v in raw["inputs"]),
            multi_group=str(raw.get("type", "I")) == "II",
            metric=str(raw["metric"]),
            caps=Caps(**caps),
            group_description=str(raw.get("group_description", "")),
            source=str(raw.get("source", "")),
            license=str(raw.get("license", "")),
            split_kind=str(raw.get("split", {}).get("kind", "")),
            split_rationale=str(raw.get("split", {}).get("rationale", "")),
            suite=str(raw.get("suite", "real")),
            priors=_priors(raw),
        )

    @property
    def task_id(self) -> str:
        return self.meta.task_id

    @cached_property
    def train(self) -> pd.DataFrame:
        return _read_csv(self.root / "data" / "train.csv")

    @cached_property
    def group_ids(self) -> list[str]:
        if not self.meta.multi_group:
            return []
        return sorted(self.train[GROUP_COL].astype(str).unique())

    # ---- answer keys -------------------------------------------------------
    def heldout(self) -> dict[str, pd.DataFrame]:
        data = self.root / "data"
        if self.meta.multi_group:
            return {"test_fit": _read_csv(data / "test_fit.csv"),
                    "test_test": _read_csv(data / "test_test.csv")}
        return {"test": _read_csv(data / "test.csv")}

    def heldout_ood(self) -> pd.DataFrame | None:
        """LLM-SRBench-style problems: the out-of-domain test split."""
        path = self.root / "data" / "test_ood.csv"
        return _read_csv(path) if path.exists() else None

    def heldout_input_ranges(self) -> list[Variable]:
        frames = list(self.heldout().values())
        out = []
        for v in self.meta.inputs:
            col = pd.concat([f[v.name] for f in frames])
            out.append(Variable(v.name, v.unit, v.description, v.symbol,
                                float(col.min()), float(col.max())))
        return out

    def use_range(self) -> dict[str, tuple[float, float]]:
        """Where the validity rubric probes each input (answer key: eval/validity.json):
        the records of every split, widened to the task's stated use range."""
        from lawlab.judging import rubric

        frames = [self.train, *self.heldout().values()]
        path = self.root / "eval" / "validity.json"
        overrides = json.loads(path.read_text()).get("use_range", {}) if path.exists() else {}
        return rubric.use_ranges(pd.concat(frames, ignore_index=True), self.meta.input_names,
                                 overrides)

    def references(self) -> list[Reference]:
        with open(self.root / "eval" / "references.json") as fh:
            raw = json.load(fh)
        refs = []
        for r in raw:
            module = (self.root / "eval" / "references" / f"{r['name']}.py").read_text()
            refs.append(Reference(
                name=r["name"], citation=r["citation"], expr=r["expr"],
                global_names=tuple(r["global"]), local_names=tuple(r["local"]),
                init=dict(r.get("init", {})), constants=dict(r.get("constants", {})),
                module=module,
            ))
        return refs

    def rubric(self) -> list[dict[str, Any]]:
        with open(self.root / "eval" / "rubric.json") as fh:
            return list(json.load(fh))

    def llm_rubric(self) -> list[dict[str, Any]]:
        """What the LLM judge backend judges: the executable items, and for an
        imported official task every sentence of its rubric that only a judge model
        can read (eval/validity_rubrics.json, ``judge: llm``), verbatim, as the
        paper's S_V judges them (id ``official_<index>``)."""
        items = self.rubric()
        path = self.root / "eval" / "validity_rubrics.json"
        if path.is_file():
            with open(path, encoding="utf-8") as fh:
                doc = json.load(fh)
            items += [{"id": f"official_{s['index']}", "kind": "llm",
                       "description": str(s.get("text", ""))}
                      for s in doc.get("sentences", []) if s.get("judge") == "llm"]
        return items

    def has_world(self) -> bool:
        return (self.root / "simulator" / "world.json").exists()

    def world_spec(self) -> dict[str, Any]:
        with open(self.root / "simulator" / "world.json") as fh:
            return dict(json.load(fh))

    def world_arrays(self) -> dict[str, np.ndarray]:
        with np.load(self.root / "simulator" / "residuals.npz", allow_pickle=False) as npz:
            return {k: npz[k] for k in npz.files}

    def hidden_law(self) -> HiddenLaw:
        law = self.world_spec()["law"]
        return HiddenLaw(
            expr=law["expr"], constants=law["constants"], local=law.get("local", {}),
            base_reference=law.get("base_reference", ""), base_expr=law.get("base_expr", ""),
            added_terms=tuple(law.get("added_terms", [])), rationale=law.get("rationale", ""),
            pieces=tuple(law.get("pieces", [])), global_names=tuple(law.get("global", [])),
            local_names=tuple(law.get("local_names", [])),
        )


def _read_csv(path: Path) -> pd.DataFrame:
    df = pd.read_csv(path, dtype={GROUP_COL: str})
    return df


class TaskLibrary:
    """All tasks under one directory (each subdirectory with a metadata.yaml)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise FileNotFoundError(
                f"task library {self.root} does not exist; build it with `make tasks`"
            )
        self._tasks = {}
        for meta in sorted(self.root.glob("*/metadata.yaml")):
            task = Task(meta.parent)
            self._tasks[task.task_id] = task

    @property
    def world_fingerprint(self) -> str:
        """The fingerprint of the world key that built the library ('' for a
        library without one, e.g. imported tasks)."""
        path = self.root / "SUITE.json"
        if not path.exists():
            return ""
        return str(json.loads(path.read_text()).get("world_fingerprint", ""))

    @property
    def release(self) -> str:
        """The release the library serves: its world key's fingerprint and a hash of
        every built world (SUITE.json; a rebuild with another key, catalogue or
        private variants is another release). '' for a library without worlds'
        record (imported tasks)."""
        path = self.root / "SUITE.json"
        if not path.exists():
            return ""
        return str(json.loads(path.read_text()).get("release", ""))

    def without_private(self) -> list[str]:
        """The tasks whose Parallel world has no private piece (none of the operator's
        ``world-variants.yaml`` was drawn into its hidden law): anyone with the
        repository can enumerate that world's candidates (issue #50)."""
        out = []
        for task in self:
            if not task.has_world():
                continue
            pieces = task.world_spec().get("law", {}).get("pieces", [])
            if not any(p.get("private") for p in pieces):
                out.append(task.task_id)
        return out

    @property
    def kind(self) -> str:
        """``leaderboard``: every Parallel world has a private piece; else
        ``development`` (the public release is one: its key is published)."""
        cached: str | None = getattr(self, "_kind", None)
        if cached is None:
            cached = ("development" if self.world_fingerprint == public_fingerprint()
                      or self.without_private() else "leaderboard")
            self._kind = cached
        return cached

    def ids(self) -> list[str]:
        return list(self._tasks)

    def get(self, task_id: str) -> Task:
        return self._tasks[task_id]

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks.values())

    def __len__(self) -> int:
        return len(self._tasks)
