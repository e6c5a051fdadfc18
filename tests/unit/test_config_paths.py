"""Where commands find the task library and their state, from any directory."""

from __future__ import annotations

from lawlab import config


def test_paths_resolve_from_lawlab_home_then_the_checkout(tmp_path, monkeypatch):
    monkeypatch.delenv("LAWLAB_TASKS_DIR", raising=False)
    monkeypatch.delenv("LAWLAB_DATA_DIR", raising=False)
    monkeypatch.setenv("LAWLAB_HOME", str(tmp_path / "home"))
    assert config.tasks_dir() == (tmp_path / "home" / "var" / "tasks").resolve()
    assert config.data_dir() == (tmp_path / "home" / "var" / "run").resolve()
    monkeypatch.delenv("LAWLAB_HOME")
    monkeypatch.chdir(tmp_path)  # not the checkout, no var/ here
    assert config.tasks_dir() == (config.PROJECT_ROOT / "var" / "tasks").resolve()
    monkeypatch.setenv("LAWLAB_TASKS_DIR", str(tmp_path / "lib"))
    assert config.tasks_dir() == (tmp_path / "lib").resolve()


def test_the_service_address_comes_from_the_environment_then_ready_files(tmp_path,
                                                                          monkeypatch):
    monkeypatch.delenv("LAWLAB_SCORER_ADDR", raising=False)
    monkeypatch.setenv("LAWLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LAWLAB_SCORER_PORT", "1")
    assert config.service_address("scorer") == "127.0.0.1:1"
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "scorer.ready.json").write_text('{"host": "0.0.0.0", "port": 4242}')
    assert config.service_address("scorer") == "127.0.0.1:4242"  # what `lawlab up` recorded
    monkeypatch.setenv("LAWLAB_SCORER_ADDR", "10.0.0.5:50054")
    assert config.service_address("scorer") == "10.0.0.5:50054"
