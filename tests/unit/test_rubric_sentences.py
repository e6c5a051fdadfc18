"""The official rubric's sentences -> executable items: zero wrong conversions on a
labelled set of official-style sentences (negations, conditions, several inputs,
units, structural claims), and every sentence kept verbatim by the importer."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from lawlab_ops.taskbuild.rubric_sentences import read

LABELS = yaml.safe_load((Path(__file__).resolve().parents[1] / "data"
                         / "rubric_sentences.yaml").read_text())
FRAME = dict(inputs=LABELS["inputs"], target=LABELS["target"]["name"],
             target_symbol=LABELS["target"]["symbol"], target_unit=LABELS["target"]["unit"])


def test_the_labelled_set_is_large_and_mixed():
    readings = [s["reading"] for s in LABELS["sentences"]]
    assert len(readings) >= 40
    assert sum(r is None for r in readings) >= 20 and sum(r is not None for r in readings) >= 15


@pytest.mark.parametrize("case", LABELS["sentences"], ids=lambda c: c["text"][:50])
def test_each_sentence_reads_as_labelled(case):
    got = read(case["text"], **FRAME)
    assert got == case["reading"], f"{case['text']!r}: got {got}, label {case['reading']}"
