"""Task specifications as data (issue #17): one YAML file per task, every rubric
item probe-able and cited; a bad file is refused with a message naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lawlab.tasks import specs


def test_every_task_file_loads_with_cited_rubrics():
    loaded = specs.load_specs()
    assert len(loaded) == 41
    assert len({s.task_id for s in loaded}) == 41
    for s in loaded:
        assert 4 <= len(s.rubric) <= 14, s.task_id
        assert all(item["citation"].strip() for item in s.rubric)
        assert s.split_rationale and s.references


def _copy(tmp_path: Path, edit) -> Path:
    src = specs.TASKS_DIR / "puromycin_enzyme_kinetics.yaml"
    doc = yaml.safe_load(src.read_text())
    edit(doc)
    out = tmp_path / "puromycin_enzyme_kinetics.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False))
    return out


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["rubric"][0].pop("citation"), "has no citation"),
    (lambda d: d["rubric"][1].update(kind="wiggly"), "unknown kind 'wiggly'"),
    (lambda d: d["rubric"][1].update(input="temperature"), "unknown input 'temperature'"),
    (lambda d: d["rubric"].append(dict(d["rubric"][0])), "appears twice"),
    (lambda d: d.__setitem__("rubric", d["rubric"][:2]), "at least 4"),
    (lambda d: d.pop("split"), "missing field 'split'"),
])
def test_a_bad_specification_is_refused_by_name(tmp_path, edit, message):
    path = _copy(tmp_path, edit)
    with pytest.raises(ValueError, match=message) as err:
        specs.spec_from_yaml(path)
    assert "puromycin_enzyme_kinetics.yaml" in str(err.value)


def test_the_registry_is_one_module_without_import_cycles():
    root = Path(specs.__file__).parent
    assert not (root / "specs_more.py").exists()
    assert {p.name for p in (root / "task_specs").glob("*.yaml")} >= {"ORDER.yaml"}
