"""Results to share and compare (issue #52): a campaign exported to one file, that
file opened on a fresh data dir (import, `lawlab view FILE`, every reading
command), and two agents compared per task, against real services.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tarfile
import urllib.request
from pathlib import Path

from lawlab.agent.v1 import agent_pb2
from tests.integration.test_campaign import GOOD, own_agent, stub_of
from tests.support.scripted_llm import ScriptedLLM

LAWLAB = str(Path(sys.executable).parent / "lawlab")
SECRET = "sk-live-7Hq2Zr9WmX4pL0vN"  # an API key a model echoed into its transcript
TASKS = ["dnase_elisa", "puromycin_enzyme_kinetics"]


def _leaky(body: dict) -> str:
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    if turn == 0:
        return f"<python>print('{SECRET}')</python>"
    return GOOD[1]


def _run(*args: str, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([LAWLAB, *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_an_export_opens_on_a_fresh_data_dir_and_compares(cluster, tmp_path):
    with ScriptedLLM(respond=_leaky) as llm, own_agent(cluster, tmp_path / "origin", llm) as c:
        addr = c.address("agent")
        env = dict(os.environ, LAWLAB_INTERNAL_TOKEN=cluster.internal_token,
                   LAWLAB_LLM_API_KEY=SECRET)
        env.pop("LAWLAB_TRIAL_STORE_URL", None)
        run = _run("campaign", "run", "--agent-addr", addr, "--name", "share",
                   "--agents", "template,openai/leaky", "--tasks", ",".join(TASKS),
                   "--settings", "real", "--yes", env=env, timeout=600)
        assert run.returncode == 0, run.stdout + run.stderr
        original = {t.trial_id: t for t in stub_of(c).ListTrials(
            agent_pb2.ListTrialsRequest(campaign_id="share")).trials}
        assert len(original) == 4
        out = tmp_path / "share.lawlab.tar.gz"
        exported = _run("export", "share", "--agent-addr", addr, "-o", str(out),
                        "--tasks-dir", str(cluster.tasks_dir), env=env)
        assert exported.returncode == 0, exported.stderr
        assert "4 trials, 4 transcripts" in exported.stdout, exported.stdout
        assert "secret(s) redacted" in exported.stdout, exported.stdout
        # an unknown campaign: one line naming it
        missing = _run("export", "shar", "--agent-addr", addr, env=env)
        assert missing.returncode == 1 and "did you mean 'share'" in missing.stderr, \
            missing.stderr

    # the file: every member named, no secret anywhere, the release and the attempts
    with tarfile.open(out) as tar:
        names = tar.getnames()
        texts = {n: tar.extractfile(n).read().decode() for n in names}
    assert names[0] == "lawlab-export.json"
    assert {"campaign.json", "trials.jsonl"} <= set(names)
    assert sum(n.startswith("trajectories/") for n in names) == 4
    assert not any(SECRET in text for text in texts.values())
    assert not any(cluster.internal_token in text for text in texts.values())
    manifest = json.loads(texts["lawlab-export.json"])
    assert manifest["campaign_id"] == "share" and manifest["trials"] == 4
    assert manifest["release"] and manifest["redacted"] >= 2  # the reply and the tool output
    lines = [json.loads(line) for line in texts["trials.jsonl"].splitlines()]
    assert all("trajectory_path" not in d["trial"] for d in lines)
    first = lines[0]["attempts"][0]
    assert first["outcome"] == "ok" and first["started"] > 0 and first["ended"] >= \
        first["started"]

    # a fresh machine: nothing running, a data dir of its own
    fresh = tmp_path / "fresh"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LAWLAB_")}
    env.update(LAWLAB_DATA_DIR=str(fresh), LAWLAB_TASKS_DIR=str(cluster.tasks_dir),
               LAWLAB_AGENT_ADDR="")
    imported = _run("import", str(out), env=env)
    assert imported.returncode == 0, imported.stderr
    assert "imported campaign share" in imported.stdout and "4 trials" in imported.stdout
    again = _run("import", str(out), env=env)
    assert again.returncode == 0 and "already in" in again.stdout, again.stdout + again.stderr

    trials = _run("campaign", "trials", "share", "--offline", env=env)
    assert trials.returncode == 0, trials.stderr
    listed = {tuple(line.split()[:2]) for line in trials.stdout.splitlines()[2:]}
    assert listed == {(t.task_id, t.agent + (f"/{t.model}" if t.model else ""))
                      for t in original.values()}, trials.stdout
    assert trials.stdout.count("completed") == 4, trials.stdout
    status = _run("campaign", "status", "share", "--offline", env=env)
    assert status.returncode == 0 and "finished" in status.stdout, status.stdout + status.stderr
    leaky = next(t for t in original.values() if t.model == "leaky")
    shown = _run("trial", "show", leaky.trial_id, "--offline", env=env)
    assert shown.returncode == 0 and "final_formula" in shown.stdout, shown.stderr
    assert "[redacted]" in shown.stdout and SECRET not in shown.stdout

    # the comparison: the per-task means are the trials' own scores
    cmp = _run("compare", "share:template", "share:openai/leaky", "--json", "--offline",
               env=env)
    assert cmp.returncode == 0, cmp.stderr
    doc = json.loads(cmp.stdout)
    by = {(ln["task_id"], ln["score"]): ln for ln in doc["lines"]}
    assert {t for t, _ in by} == set(TASKS)
    for t in original.values():
        side = "a" if t.agent == "template" else "b"
        for score in ("s_n", "s_v"):
            want = getattr(t.scores, score) if t.scores.HasField(score) else 0.0
            assert abs(by[(t.task_id, score)][side]["mean"] - want) < 1e-12
    for ln in doc["lines"]:
        assert abs(ln["diff"] - (ln["b"]["mean"] - ln["a"]["mean"])) < 1e-12
    table = _run("compare", "share:template", "share:openai/leaky", "--sort", "task",
                 "--offline", env=env)
    assert table.returncode == 0 and "| task | setting | score | A | B | B - A |" in table.stdout
    rows = [line.split("|")[1].strip() for line in table.stdout.splitlines()
            if line.startswith("| ") and not line.startswith("| task")]
    assert rows == sorted(rows)
    wrong = _run("compare", "share:template", "share:openai/nope", "--offline", env=env)
    assert wrong.returncode == 2 and "its agents: openai/leaky, template" in wrong.stderr, \
        wrong.stderr

    # `lawlab view FILE`: the pages of the export, nothing written to the data dir
    _view_opens_the_file(out, env, original)
    # a damaged or foreign file: one line saying what is wrong
    (tmp_path / "not.tar.gz").write_text("hello")
    bad = _run("import", str(tmp_path / "not.tar.gz"), env=env)
    assert bad.returncode == 2 and "is not a lawlab export" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def _view_opens_the_file(out: Path, env: dict, original: dict) -> None:
    from tests.integration.test_first_day import _closed_port

    port = _closed_port()
    other = dict(env, LAWLAB_DATA_DIR=str(out.parent / "untouched"))
    price_list = out.parent / "prices.yaml"
    price_list.write_text("openai/leaky: {prompt: 1000000, completion: 2000000}\n")
    view = subprocess.Popen([LAWLAB, "view", str(out), "--port", str(port), "--prices",
                             str(price_list)], env=other,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = view.stdout.readline()
        assert line.startswith(f"lawlab view: http://127.0.0.1:{port}/"), \
            line + view.stderr.read()

        def get(path: str) -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
                return r.read().decode()

        listed = get("/trials?campaign=share")
        assert "Trials (4)" in listed
        # tokens per model and in all (the scripted server reports 100 + 20 per reply)
        leaky = [t for t in original.values() if t.model == "leaky"]
        spent = sum(t.prompt_tokens + t.completion_tokens for t in leaky)
        assert spent > 0 and "Model tokens" in listed
        assert "<tr><td>openai/leaky</td><td>2</td>" in listed
        assert f"<td>{spent:,}</td>" in listed
        # the cost beside the tokens: a dollar per prompt token, two per completion token
        dollars = sum(t.prompt_tokens + 2 * t.completion_tokens for t in leaky)
        assert f"<td>${dollars:,.2f}</td></tr>" in listed, listed[:3000]
        # built-in agents use no tokens: they cost nothing, and the total is whole
        assert "<td>template</td><td>2</td><td>0</td><td>0</td><td>0</td><td>0</td>" \
               "<td>$0.00</td>" in listed
        assert f"<td>${dollars:,.2f}</td></tr></table>" in listed  # the "all" row
        pivot = get("/compare?a=share:template&b=share:openai/leaky&sort=task")
        for needle in ("Compare share:template and share:openai/leaky", *TASKS, "S_N", "S_V",
                       "task &#9660;", "sort=diff"):  # sorted by task; B - A sorts too
            assert needle in pivot, needle
        assert "no trials of agent" in get("/compare?a=share:template&b=share:nobody")
        _chromium_shows_the_differences(
            f"http://127.0.0.1:{port}/compare?a=share:template&b=share:openai/leaky", pivot)
        some = next(iter(original))
        page = get(f"/trial/{some}")
        assert "Transcript" in page and "Submission" in page, page[:2000]
    finally:
        view.send_signal(signal.SIGTERM)
        view.wait(timeout=30)
    assert view.returncode == 0
    assert not (out.parent / "untouched").exists()


def _chromium_shows_the_differences(url: str, page: str) -> None:
    """The pivot as a person sees it (headless Chromium): each change coloured, green
    where B is above A, red where below."""
    import re
    import shutil
    import tempfile

    import matplotlib.image

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "chromium is installed by `make install` (Debian package chromium)"
    with tempfile.TemporaryDirectory() as tmp:
        shot = Path(tmp) / "compare.png"
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", "--window-size=1200,800", f"--screenshot={shot}",
                        url], check=True, capture_output=True, timeout=120)
        rgb = (matplotlib.image.imread(shot)[..., :3] * 255).round()
    diffs = [float(d) for d in re.findall(r"<td class=(?:pass|fail)>([+-][0-9.]+)</td>", page)]
    for colour, wanted in (((30, 107, 67), any(d > 0 for d in diffs)),
                           ((192, 57, 43), any(d < 0 for d in diffs))):
        seen = ((abs(rgb[..., 0] - colour[0]) < 8) & (abs(rgb[..., 1] - colour[1]) < 8)
                & (abs(rgb[..., 2] - colour[2]) < 8)).sum()
        assert (seen > 20) == wanted, (colour, seen, diffs)
    assert diffs, "no coloured difference on the page"
