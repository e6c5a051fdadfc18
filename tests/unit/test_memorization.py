"""The memorization audit against a scripted model (real HTTP), on real tasks."""

from __future__ import annotations

import json

from lawlab_ops.cli import main
from lawlab_ops.memorization import match, prompt_for
from tests.support.scripted_llm import ScriptedLLM

ANSWERS = {
    # model -> (answer for the brain/body task, answer for the enzyme task)
    "recaller": ("<formula>k * body ** m</formula>",
                 "<formula>V * conc ** h / (K ** h + conc ** h)</formula>"),
    "half": ("<formula>c0 + c1 * body</formula>",
             "Surely <formula>Vmax*conc^n/(Km^n+conc^n)</formula>"),
    "never": ("I cannot know without data.", "<formula>a * conc / (b + conc)</formula>"),
}


def respond(body):
    prompt = body["messages"][-1]["content"]
    brain, enzyme = ANSWERS[body["model"]]
    return brain if "brain" in prompt else enzyme


def test_prompt_holds_only_target_and_inputs(library):
    task = library.get("puromycin_enzyme_kinetics")
    p = prompt_for(task)
    assert "rate (counts/min^2)" in p and "conc (ppm)" in p
    assert task.meta.context[:40] not in p and "Puromycin" not in p


def test_structural_matching_of_recalled_forms(library):
    brain = library.get("brain_body_allometry")  # best reference: a * body ** b
    assert match(brain, "<formula>k * body ** m</formula>").matched
    assert match(brain, "<formula>exp(c) * body ** m</formula>").matched  # reparameterised
    assert not match(brain, "<formula>k * body ** 0.75</formula>").matched  # special case
    assert not match(brain, "<formula>a + b * body</formula>").matched
    assert "no <formula>" in match(brain, "the answer is a*body**b").reason
    assert "not a restricted expression" in match(
        brain, "<formula>__import__('os')</formula>").reason


def test_audit_assigns_tiers_across_models(tmp_path, tasks_dir):
    with ScriptedLLM(respond=respond) as llm:
        code = main(["audit", "memorization", "--models", "recaller,half,never",
                     "--tasks", "brain_body_allometry,puromycin_enzyme_kinetics",
                     "--samples", "3", "--llm-base-url", llm.base_url, "--out", str(tmp_path),
                     "--tasks-dir", str(tasks_dir)])
        assert code == 0
        assert len(llm.requests) == 2 * 3 * 3
    doc = json.loads((tmp_path / "memorization.json").read_text())
    # brain: recalled by 1 of 3 models -> Mid; enzyme (Hill): by 2 of 3 -> Canon
    assert doc["tiers"] == {"brain_body_allometry": "Mid", "puromycin_enzyme_kinetics": "Canon"}
    never = [r for r in doc["recalls"] if r["model"] == "never"]
    assert not any(r["recalled"] for r in never)
    md = (tmp_path / "memorization.md").read_text()
    # columns in model order: half, never, recaller
    assert "| puromycin_enzyme_kinetics | hill | Canon | 3/3 recalled | 0/3 | 3/3 recalled |" in md
