"""An imported task's official rubric is reported sentence by sentence: executable
ones with their verdicts, the LLM judge's ones "not judged" when no judge model is
configured (never guessed)."""

from __future__ import annotations

import json

from lawlab.judging.validity import official_rubric_rows


def _task(tmp_path):
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "validity_rubrics.json").write_text(json.dumps({
        "source": "metadata.yaml validity_rubrics", "sentences": [
            {"index": 0, "text": "predicted rate is non-negative", "judge": "executable",
             "item_id": "r1_nonneg"},
            {"index": 1, "text": "captures a lag phase", "judge": "llm", "item_id": None}]}))
    return tmp_path


def test_llm_sentences_are_not_judged_without_a_model(tmp_path):
    rows = official_rubric_rows(_task(tmp_path), {"r1_nonneg": (True, "minimum 0.1")})
    assert rows == [("x", "predicted rate is non-negative", "minimum 0.1"),
                    ("?", "captures a lag phase",
                     "not judged: needs the LLM judge and no judge model is configured "
                     "(LAWLAB_JUDGE_LLM_MODEL)")]


def test_with_a_model_the_llm_backend_is_named(tmp_path):
    rows = official_rubric_rows(_task(tmp_path), {"r1_nonneg": (False, "minimum -1")}, "m1")
    assert rows is not None and rows[0][0] == " " and "--backend llm" in rows[1][2]


def test_task_without_official_rubric(tmp_path):
    assert official_rubric_rows(tmp_path, {}) is None


def test_the_judge_models_verdicts_are_shown_for_its_sentences(tmp_path):
    """With the LLM backend each sentence has the model's verdict (id official_<index>)."""
    rows = official_rubric_rows(_task(tmp_path), {"r1_nonneg": (True, "holds"),
                                                  "official_1": (False, "no lag phase")},
                                "judge model")
    assert rows == [("x", "predicted rate is non-negative", "holds"),
                    (" ", "captures a lag phase", "judge model: no lag phase")]
