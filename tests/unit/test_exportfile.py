"""lawlab.results.exportfile: what an export carries and how a reader treats a file from
elsewhere (issue #52)."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from lawlab.results import exportfile
from lawlab.results.exportfile import ExportError, Redactor, TrialEntry, read, write

TRIAL = {"trial_id": "t-real-template-abc", "task_id": "t", "attempts": 1}


def _export(path, attempts=None, transcripts=None, secrets=()):
    attempts = attempts if attempts is not None else [
        {"attempt": 1, "outcome": "ok", "transcript": "trajectories/t-real-template-abc"
                                                      ".attempt1.jsonl"}]
    transcripts = transcripts if transcripts is not None else {
        "trajectories/t-real-template-abc.attempt1.jsonl": '{"type": "header"}\n'}
    return write(path, {"campaign_id": "c"}, {"campaign_id": "c"},
                 [TrialEntry(dict(TRIAL), attempts)], transcripts, Redactor(list(secrets)))


def test_round_trip_and_redaction(tmp_path):
    path = tmp_path / "c.lawlab.tar.gz"
    secret = "sk-abcdefgh12345678"
    manifest = _export(path, transcripts={
        "trajectories/t-real-template-abc.attempt1.jsonl": f'{{"reply": "{secret} {secret}"}}\n'},
        secrets=[secret])
    assert manifest["redacted"] == 2 and manifest["format"] == "lawlab-export"
    got = read(path)
    assert got.manifest["campaign_id"] == "c" and got.trials[0].trial == TRIAL
    text = got.transcripts["trajectories/t-real-template-abc.attempt1.jsonl"]
    assert secret not in text and text.count("[redacted]") == 2
    assert not path.with_name(path.name + ".part").exists()


def test_secrets_come_from_token_and_key_variables(tmp_path, monkeypatch):
    (tmp_path / "internal-token").write_text("internal-token-value-1\n")
    keyfile = tmp_path / "key"
    keyfile.write_text("file-held-api-key-2\n")
    for name in list(__import__("os").environ):
        if name.endswith(("TOKEN", "API_KEY", "API_KEY_FILE")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("LAWLAB_LLM_API_KEY", "env-api-key-value-3")
    monkeypatch.setenv("LAWLAB_LLM_API_KEY_FILE", str(keyfile))
    monkeypatch.setenv("LAWLAB_TOKEN", "short")  # under 8 characters: not redacted
    got = exportfile.secrets_from_env(tmp_path)
    assert set(got) == {"internal-token-value-1", "file-held-api-key-2", "env-api-key-value-3"}


def _tar(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


MANIFEST = json.dumps({"format": "lawlab-export", "version": 1})


@pytest.mark.parametrize("members,says", [
    ({"x": "1"}, "no lawlab-export.json"),
    ({"lawlab-export.json": '{"format": "other", "version": 1}'}, "names format 'other'"),
    ({"lawlab-export.json": '{"format": "lawlab-export", "version": 9}'}, "export version 9"),
    ({"lawlab-export.json": MANIFEST, "campaign.json": "{}"}, "trials.jsonl is missing"),
    ({"lawlab-export.json": MANIFEST, "campaign.json": "{}", "trials.jsonl": "[1]\n"},
     "trials.jsonl line 1 is not a JSON object"),
    # a transcript name that would leave the trajectories folder
    ({"lawlab-export.json": MANIFEST, "campaign.json": "{}", "trials.jsonl": json.dumps(
        {"trial": TRIAL, "attempts": [{"attempt": 1, "transcript": "../../etc/x"}]}) + "\n"},
     "names transcript '../../etc/x'"),
    ({"lawlab-export.json": MANIFEST, "campaign.json": "{}", "trials.jsonl": json.dumps(
        {"trial": {"trial_id": "../up"}, "attempts": [{"attempt": 1, "transcript": "y"}]})
        + "\n"}, "is not a lawlab trial id"),
])
def test_a_foreign_or_damaged_file_is_refused_saying_why(tmp_path, members, says):
    path = tmp_path / "f.tar.gz"
    _tar(path, members)
    with pytest.raises(ExportError, match=says.replace("(", r"\(").replace(")", r"\)")):
        read(path)


def test_not_a_tar_and_links(tmp_path):
    (tmp_path / "plain").write_text("hello")
    with pytest.raises(ExportError, match="is not a lawlab export"):
        read(tmp_path / "plain")
    with pytest.raises(ExportError, match="no such file"):
        read(tmp_path / "absent")
    path = tmp_path / "link.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        info = tarfile.TarInfo("lawlab-export.json")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(info)
    with pytest.raises(ExportError, match="is not a regular file"):
        read(path)


def test_an_export_from_another_release_says_so(tasks_dir, tmp_path):
    """`lawlab import` and `lawlab view` print a note when the file names another library
    release than this machine's, and nothing when it names the same or none."""
    from lawlab.tasks.library import TaskLibrary
    from lawlab_ops.cli.results import release_note

    ours = TaskLibrary(tasks_dir).release
    note = release_note(tmp_path / "c.lawlab.tar.gz", "0000-other", tasks_dir)
    assert "exported from library release 0000-other" in note and ours in note
    assert release_note(tmp_path / "c.lawlab.tar.gz", ours, tasks_dir) == ""
    assert release_note(tmp_path / "c.lawlab.tar.gz", "", tasks_dir) == ""
    assert release_note(tmp_path / "c.lawlab.tar.gz", "0000-other", tmp_path / "none") == ""
