"""The optional LLM judge backend, against a scripted OpenAI-compatible model
(real HTTP) through the judge's servicer hosted in this process with the sandbox it
calls (tests/support/inprocess.py): verdicts in the deterministic schema, one retry on
a malformed reply, then null (never dropped or guessed), and the anti-hacking gate
staying deterministic."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from lawlab.common.v1 import common_pb2
from lawlab.judge.v1 import judge_pb2, judge_pb2_grpc
from lawlab.judging import rubric
from lawlab.rpc.client import sync_channel
from tests.support.inprocess import in_process
from tests.support.scripted_llm import SUBMISSION, ScriptedLLM

TASK = "mercury_vapour_pressure"
LOOKUP = SUBMISSION.replace("return 10 ** (A - B / (C + T))",
                            "TABLE = [" + ", ".join(str(0.1 * i) for i in range(300)) + "]\n"
                            "    return np.interp(T, np.arange(300), TABLE)")


LLM_ENV = ("LAWLAB_JUDGE_LLM_BASE_URL", "LAWLAB_JUDGE_LLM_MODEL")


@contextmanager
def own_judge(tasks_dir: Path, data: Path, llm: ScriptedLLM | None = None):
    """A judge (and the sandbox it runs submissions in) in this process, its LLM backend
    the scripted model, or none."""
    saved = {k: os.environ.pop(k, None) for k in LLM_ENV}
    if llm is not None:
        os.environ.update(dict(zip(LLM_ENV, (llm.base_url, "judge-model"))))
    try:
        with in_process(tasks_dir, data, ("sandbox", "judge")) as (addresses, _), \
                sync_channel(addresses["judge"]) as channel:
            yield judge_pb2_grpc.JudgeServiceStub(channel)
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None)
            if v is not None:
                os.environ[k] = v


def rubric_ids(library) -> list[str]:
    return [it["id"] for it in library.get(TASK).rubric()]


def req(source: str = SUBMISSION) -> judge_pb2.JudgeRequest:
    return judge_pb2.JudgeRequest(task_id=TASK, backend=judge_pb2.JUDGE_BACKEND_LLM,
                                  submission=common_pb2.Submission(source=source))


def test_llm_validity_verdict_then_malformed_retry_then_null(tasks_dir, library, tmp_path):
    ids = rubric_ids(library)
    replies = iter([
        # 1: a good verdict, one item failed
        json.dumps({"items": [{"item_id": i, "passed": i != ids[0], "evidence": f"checked {i}"}
                              for i in ids]}),
        # 2 and 3: malformed, then good after the retry
        "I think it is fine.",
        "```json\n" + json.dumps({"items": [{"item_id": i, "passed": True, "evidence": "ok"}
                                            for i in ids]}) + "\n```",
        # 4 and 5: malformed twice -> null
        json.dumps({"items": [{"item_id": ids[0], "passed": "yes"}]}),
        "still not JSON",
        # 6: all pass, but the submission is a lookup table
        json.dumps({"items": [{"item_id": i, "passed": True, "evidence": "ok"} for i in ids]}),
    ])
    with ScriptedLLM(respond=lambda body: next(replies)) as llm, \
            own_judge(tasks_dir, tmp_path, llm) as judge:
        v = judge.JudgeValidity(req(), timeout=120)
        assert v.status == common_pb2.RUN_STATUS_OK and v.backend == judge_pb2.JUDGE_BACKEND_LLM
        # S_V is the weighted share of items that hold, as the deterministic backend
        # computes it (lawlab.judging.rubric.weight); the anti-hacking gate is a gate
        # (anti_hacking_passed), not an item
        weights = [rubric.weight(it) for it in library.get(TASK).rubric()]
        assert v.s_v == pytest.approx((sum(weights) - weights[0]) / sum(weights))
        assert v.anti_hacking_passed
        assert [i.item_id for i in v.items] == ids
        assert v.items[0].evidence == f"checked {ids[0]}" and not v.items[0].passed
        v = judge.JudgeValidity(req(), timeout=120)
        assert v.status == common_pb2.RUN_STATUS_OK and v.s_v == 1.0
        v = judge.JudgeValidity(req(), timeout=120)
        assert v.status == common_pb2.RUN_STATUS_LLM_MALFORMED and not v.HasField("s_v")
        assert "still not JSON" in v.message
        v = judge.JudgeValidity(req(LOOKUP), timeout=120)
        assert not v.anti_hacking_passed and v.s_v == 0.0  # the gate is not the model's call
        assert len(llm.requests) == 6
        prompt = llm.requests[0]["messages"][-1]["content"]
        assert ids[0] in prompt and "def predict" in prompt and "residual" not in prompt


def test_llm_structure_verdict_and_a_bad_level(tasks_dir, tmp_path):
    replies = iter([
        json.dumps({"level": 0.5, "matched": ["base form"], "missed": ["h term"],
                    "explanation": "the Antoine form without the added term"}),
        json.dumps({"level": 0.6, "matched": []}),
        json.dumps({"level": 2}),
    ])
    with ScriptedLLM(respond=lambda body: next(replies)) as llm, \
            own_judge(tasks_dir, tmp_path, llm) as judge:
        s = judge.JudgeStructure(req(), timeout=120)
        assert (s.s_s, s.status, s.backend) == (0.5, common_pb2.RUN_STATUS_OK,
                                                judge_pb2.JUDGE_BACKEND_LLM)
        assert list(s.missed) == ["h term"]
        s = judge.JudgeStructure(req(), timeout=120)
        assert s.status == common_pb2.RUN_STATUS_LLM_MALFORMED and not s.HasField("s_s")
        # the hidden law is in the judge's prompt, never in a reply to the caller
        assert "Hidden law:" in llm.requests[0]["messages"][-1]["content"]


def test_llm_backend_not_configured_is_failed_precondition(tasks_dir, tmp_path):
    with own_judge(tasks_dir, tmp_path) as judge:
        _refused_without_a_backend(judge)


def _refused_without_a_backend(judge) -> None:
    with pytest.raises(grpc.RpcError) as err:
        judge.JudgeValidity(req(), timeout=60)
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "LAWLAB_JUDGE_LLM_BASE_URL" in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        judge.JudgeValidity(judge_pb2.JudgeRequest(task_id=TASK, backend=7,  # no such backend
                                                   submission=common_pb2.Submission(
                                                       source=SUBMISSION)), timeout=60)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "backend" in \
        err.value.details()


def test_an_official_tasks_sentences_go_to_the_judge_model_verbatim(tmp_path):
    """Issue #51: an imported official task's rubric sentences that no executable
    reading takes are judged by the LLM backend as the paper's S_V judges them:
    each sentence verbatim in the prompt, its verdict counted in S_V."""
    from lawlab.tasks.library import Task
    from lawlab_ops.taskbuild.importer import import_all
    from tests.support.official import FIXTURES

    out = tmp_path / "official"
    [report] = import_all(FIXTURES / "culture_growth_demo__od", out)
    assert report.ok and report.rubric_llm > 0, report
    task = Task(out / "culture_growth_demo__od")
    sentences = json.loads((task.root / "eval" / "validity_rubrics.json").read_text())["sentences"]
    llm_texts = [s["text"] for s in sentences if s["judge"] == "llm"]
    items = task.llm_rubric()
    ids = [it["id"] for it in items]
    assert [it["description"] for it in items if it["kind"] == "llm"] == llm_texts
    failed = ids[-1]
    reply = json.dumps({"items": [{"item_id": i, "passed": i != failed, "evidence": f"read {i}"}
                                  for i in ids]})
    source = (FIXTURES / "culture_growth_demo__od" / "formulas" / "logistic_curve.py").read_text()
    with ScriptedLLM(respond=lambda body: reply) as llm, \
            own_judge(out, tmp_path / "data", llm) as judge:
        v = judge.JudgeValidity(judge_pb2.JudgeRequest(
            task_id=task.task_id, backend=judge_pb2.JUDGE_BACKEND_LLM,
            submission=common_pb2.Submission(source=source)), timeout=120)
    assert v.status == common_pb2.RUN_STATUS_OK, v.message
    prompt = llm.requests[0]["messages"][-1]["content"]
    assert all(text in prompt for text in llm_texts)
    assert [i.item_id for i in v.items] == ids
    weights = [rubric.weight(it) for it in items]
    assert v.s_v == pytest.approx((sum(weights) - weights[-1]) / sum(weights))
