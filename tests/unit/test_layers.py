"""Layers: the services stand on the core (libs/lawlab); the operator's programs
(libs/lawlab_ops: the CLI, the task builder, reports, the launcher, the client) stand
on the core and start the services. The core imports neither, no service imports the
operator's package (the one way up is by name, not by import: `lawlab serve NAME`
starts the service package NAME)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVICES = {f"lawlab_{p.name}" for p in (ROOT / "services").iterdir() if p.is_dir()}
CORE, OPS = ROOT / "libs" / "lawlab", ROOT / "libs" / "lawlab_ops"


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_the_core_imports_no_service():
    assert SERVICES >= {"lawlab_agent", "lawlab_simulator", "lawlab_judge", "lawlab_scorer",
                        "lawlab_sandbox"}
    sources = [p for p in (ROOT / "libs" / "lawlab").rglob("*.py") if not p.name.endswith("_pb2.py")
               and not p.name.endswith("_pb2_grpc.py")]
    assert len(sources) > 50
    offenders = {str(p.relative_to(ROOT)): sorted(_imports(p) & (SERVICES | {"lawlab_ops"}))
                 for p in sources}
    assert {k: v for k, v in offenders.items() if v} == {}


def _sources(*roots: Path) -> list[Path]:
    return [p for root in roots for p in root.rglob("*.py")
            if not p.name.endswith(("_pb2.py", "_pb2_grpc.py"))]


def test_no_service_imports_the_operators_package():
    """Issue #53: what the services run on is the core; the operator's programs (the
    CLI, the builder, reports and figures, the launcher, the client) are a package no
    service imports, at load time or inside a function."""
    services = _sources(ROOT / "services")
    assert len(services) > 60
    offenders = sorted(str(p.relative_to(ROOT)) for p in services if "lawlab_ops" in _imports(p))
    assert offenders == []
    # what the two share is in the core, and the operator's package is not empty
    assert {"cli", "taskbuild", "report.py", "paper.py", "launcher.py", "client.py"} <= \
        {p.name for p in OPS.iterdir()}
    assert not {"cli", "taskbuild", "report.py", "paper.py", "launcher.py", "client.py"} & \
        {p.name for p in CORE.iterdir()}


def test_the_layer_check_sees_an_import_inside_a_function(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from lawlab_ops.report import figures\n")
    assert "lawlab_ops" in _imports(module)


def test_the_sandbox_runner_checks_the_cores_contract_names():
    """The box's runner is standalone (it imports nothing of lawlab), so it keeps its
    own list of the contract's names; it must be the core's."""
    from lawlab.law.contract import REQUIRED_NAMES

    tree = ast.parse((ROOT / "services/sandbox/lawlab_sandbox/runner.py").read_text(encoding="utf-8"))
    (value,) = [ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "REQUIRED" for t in n.targets)]
    assert tuple(value) == tuple(REQUIRED_NAMES)


def test_one_reader_of_law_modules():
    """Law modules are parsed by lawlab.law.contract.read_module and predict() bodies
    walked by lawlab.law.predict: no other module of the core or the services walks a
    predict function or collects a module's literals itself."""
    readers = []
    for path in [*CORE.rglob("*.py"), *OPS.rglob("*.py"), *(ROOT / "services").rglob("*.py")]:
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")) or path.name in ("contract.py",
                                                                            "predict.py"):
            continue
        text = path.read_text(encoding="utf-8")
        if "literal_eval(node.value)" in text or '.name == "predict"' in text \
                or "name == 'predict'" in text:
            readers.append(str(path.relative_to(ROOT)))
    # the sandbox runner executes modules in the box (it must not import lawlab)
    assert readers == [] or readers == ["services/sandbox/lawlab_sandbox/runner.py"], readers


def test_every_package_is_in_the_wheel():
    """pyproject lists packages by name (the images install the wheel): a new
    subpackage left out imports fine in the editable checkout and is missing
    from every image."""
    import tomllib

    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(doc["tool"]["setuptools"]["packages"])
    dirs = doc["tool"]["setuptools"]["package-dir"]
    found = set()
    for top, folder in dirs.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if "__pycache__" not in rel.parts:
                found.add(".".join([top, *rel.parts]))
    assert found - listed == set()


def test_every_data_file_is_in_the_wheel():
    """The task builder reads YAML and JSON beside its code (feynman.yaml, the
    LSR-Transform variables and settings, the validity labels): each is package data,
    or an image built from the wheel cannot build the suites."""
    import fnmatch
    import tomllib

    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    data = doc["tool"]["setuptools"]["package-data"]
    for package, patterns in data.items():
        folder = ROOT / "libs" / package.replace(".", "/")
        files = [f.relative_to(folder).as_posix() for f in folder.rglob("*")
                 if f.suffix in (".yaml", ".json") and "__pycache__" not in f.parts]
        assert files, package
        missing = [f for f in files if not any(fnmatch.fnmatch(f, p) and
                                               f.count("/") == p.count("/") for p in patterns)]
        assert not missing, (package, missing)


def test_import_names_follow_folders():
    """Issue #32: every package lives in a folder of its own name (lawlab in
    libs/lawlab, lawlab_<name> in services/<name>/lawlab_<name>), so a module's
    import name is its path below a source root and path-based tools (mypy, an
    editor, grep) see the services as the packages they import."""
    import tomllib

    doc = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    dirs = doc["tool"]["setuptools"]["package-dir"]
    assert {f"lawlab_{s.name}" for s in (ROOT / "services").iterdir() if s.is_dir()} \
        == set(dirs) - {"lawlab", "lawlab_ops"}
    for top, folder in dirs.items():
        assert Path(folder).name == top, (top, folder)
        assert (ROOT / folder / "__init__.py").exists(), folder
    for service in (ROOT / "services").iterdir():  # nothing beside the package
        assert sorted(p.name for p in service.iterdir() if p.name != "__pycache__") \
            == [f"lawlab_{service.name}"], service


def test_the_agent_service_has_no_long_function_and_no_generated_messages_inside():
    """Issue #20: no function in services/agent over 60 lines; the policies, prompts,
    views, campaign grids and built-in agents work on the core's lawlab.tasks.library.SolverTask, so only
    the service's edges (servicer, admission, wire, server, worker, the trial
    room's RPC calls, the status page's external feed, the loader of export files,
    whose trials are Trial messages in JSON) import a *_pb2 module."""
    agent = ROOT / "services" / "agent" / "lawlab_agent"
    edges = {"servicer.py", "admission.py", "wire.py", "server.py", "worker.py",
             "pages/status.py", "trial/opening.py", "trial/tools.py", "trial/scoring.py",
             "campaigns/scheduler.py", "exports.py"}
    long, inside = [], []
    for path in sorted(agent.rglob("*.py")):
        rel = str(path.relative_to(agent))
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.end_lineno - node.lineno + 1 > 60:
                long.append(f"{rel}:{node.name}")
            if isinstance(node, ast.ImportFrom) and rel not in edges and any(
                    a.name.endswith(("_pb2", "_pb2_grpc")) for a in node.names):
                inside.append(rel)
    assert not long, long
    assert not inside, inside


def test_the_simulator_service_is_rooms_behind_a_thin_servicer():
    """Issue #32: sessions, queries and submissions are rooms (services/simulator/
    {sessions,queries,submissions}.py); the servicer converts and delegates (under
    about 250 lines, no except clause of its own: the rooms map the ledger's errors),
    handlers read the caller the interceptor settled, and no function in the service
    is over 60 lines."""
    sim = ROOT / "services" / "simulator" / "lawlab_simulator"
    servicer = (sim / "servicer.py").read_text()
    assert len(servicer.splitlines()) <= 250
    tree = ast.parse(servicer)
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.ExceptHandler)]
    # the servicer neither resolves callers nor touches the ledger itself
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    assert not names & {"ledger", "_who", "identify", "rates"}, names & {"ledger", "_who"}
    for room in ("sessions.py", "queries.py", "submissions.py"):
        assert (sim / room).exists()
    long = []
    for path in sorted(sim.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                    node.end_lineno - node.lineno + 1 > 60:
                long.append(f"{path.name}:{node.name}")
    assert not long, long


def test_the_scorer_servicer_only_converts():
    """Issue #53: the scorer's servicer converts requests and answers; running the
    module, the table test, the refit and how the two scores combine are
    lawlab_scorer.scoring's (tested in process: test_refit_every_number,
    test_antihack_text_tables)."""
    servicer = ROOT / "services" / "scorer" / "lawlab_scorer" / "servicer.py"
    imported = _imports(servicer)
    tree = ast.parse(servicer.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not names & {"jumps", "literals", "refit", "numeric"}, names
    assert "lawlab_scorer" in imported and "scoring" in names
    calls = {n.func.attr for n in ast.walk(tree) if isinstance(n, ast.Call)
             and isinstance(n.func, ast.Attribute)}
    assert not calls & {"rewrite", "refit", "verdict", "group_metrics"}, calls


def test_one_solver_facing_task_model():
    """Issue #32: the variables, caps and solver-facing task are the core's
    (lawlab.tasks.library); no service defines its own."""
    own = []
    for path in (ROOT / "services").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in ("Variable", "Caps", "SolverTask",
                                                                "TaskMeta"):
                own.append(f"{path.relative_to(ROOT)}:{node.name}")
    assert own == []


def test_built_in_agents_share_a_kit_not_each_others_private_methods():
    """Issue #32: the sandbox-side scripts are read as text, never imported by the
    service; issue #53: an agent is one folder, its policy beside the script it sends
    (builtin/<agent>/fit.py); an agent reaches another's code only through
    builtin/kit.py: no `OtherAgent._private(...)`."""
    builtin = ROOT / "services" / "agent" / "lawlab_agent" / "builtin"
    assert {str(p.relative_to(builtin)) for p in builtin.rglob("*fit*.py")} == {
        "sr/fit.py", "template/fit.py", "experimenter/fit.py", "scientist/fit.py"}
    reached = []
    for path in builtin.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                    and not node.attr.startswith("__") and isinstance(node.value, ast.Name) \
                    and node.value.id not in ("self", "cls") and node.value.id[:1].isupper():
                reached.append(f"{path.relative_to(builtin)}: {node.value.id}.{node.attr}")
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names += [f"{node.module}.{a.name}" for a in node.names]
            reached += [f"{path.name} imports {n}" for n in names if n.endswith(".fit")]
    assert reached == []


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


def test_operators_reach_the_simulators_store_only_through_the_simulator():
    """Issue #32: the simulator is the one program that opens its store; the CLI
    (tokens, epochs, the leaderboard, the external audit), the other services and
    the status page use its operator API. The exceptions are the simulator's two
    benchmarks, which time the store itself in-process beside the served path."""
    store = "lawlab_simulator.store"
    assert not (ROOT / "libs" / "lawlab" / "ledger.py").exists()  # the store lives at home
    programs = [*CORE.rglob("*.py"), *OPS.rglob("*.py"), *(ROOT / "services").rglob("*.py"),
                *(ROOT / "bench").rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]
    openers = sorted(str(p.relative_to(ROOT)) for p in programs
                     if any(m == store or m.startswith(store + ".") for m in _imported_modules(p)))
    inside = [p for p in openers if p.startswith("services/simulator/")]
    assert len(inside) >= 4  # the rooms and the server (never vacuous)
    # one repository per aggregate, each small
    store_dir = ROOT / "services" / "simulator" / "lawlab_simulator" / "store"
    repositories = sorted(p.stem for p in store_dir.glob("*.py"))
    assert {"audit", "budgets", "epochs", "sessions", "submissions", "tokens"} <= set(repositories)
    for path in store_dir.glob("*.py"):
        assert len(path.read_text().splitlines()) <= 300, path.name
    assert [p for p in openers if p not in inside] == ["bench/simulator_bench.py",
                                                       "bench/simulator_costs.py"], openers
    # and the operator verbs are calls of the operator API
    for cli in ("operators.py", "leaderboard.py", "campaign.py"):
        text = (OPS / "cli" / cli).read_text(encoding="utf-8")
        assert "operator_channel" in text and "lawlab_simulator" not in text, cli


# the fields a vocabulary types (lawlab.vocab), by the names they go by in the code
VOCABULARY_OF = {
    "setting": ("Setting",), "cause": ("Cause",), "role": ("Role",), "release": ("Release",),
    "backend": ("JudgeBackend",), "confidence": ("Confidence",), "score_status": ("RunStatus",),
    "status": ("TrialStatus", "SubmissionState", "RunStatus", "ExecStatus"),
    "state": ("CampaignState", "SessionState", "SubmissionState"),
}


def _literal_comparisons(tree: ast.AST) -> list[tuple[int, str]]:
    """Comparisons of a vocabulary-named value (x.setting, status, d["state"]) with a
    word of that vocabulary written as a string literal."""
    from lawlab import vocab

    def name_of(node: ast.AST) -> str | None:
        if isinstance(node, ast.Attribute):
            return node.attr
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            return str(node.slice.value)
        return None

    def words(node: ast.AST) -> list[str]:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return [e.value for e in node.elts
                    if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return []

    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        for a, b in zip(sides, sides[1:]):
            for x, y in ((a, b), (b, a)):
                name = name_of(x)
                vocabulary = {str(m) for v in VOCABULARY_OF.get(name or "", ())
                              for m in getattr(vocab, v)}
                if vocabulary & set(words(y)):
                    found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_comparison_with_a_vocabularys_literal_word():
    """Issue #53: a setting, status, state, cause, role, release, backend or
    confidence is compared with its vocabulary's member (Setting.REAL), never with
    the word written out ("real"), in the core and every service: a typo in a
    literal compares False forever, a typo in a member fails at import."""
    seen = []
    for path in sorted([*CORE.rglob("*.py"), *OPS.rglob("*.py"),
                        *(ROOT / "services").rglob("*.py")]):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        seen += [f"{path.relative_to(ROOT)}:{n}: {text}"
                 for n, text in _literal_comparisons(ast.parse(path.read_text()))]
    assert not seen, "\n".join(seen)


def test_the_literal_check_sees_what_it_refuses():
    tree = ast.parse('if r.setting == "real" or status in ("ok", "x") or d["state"] != "open":'
                     '\n    pass\nif kind == "real" or r.setting == Setting.REAL:\n    pass\n')
    assert [n for n, _ in _literal_comparisons(tree)] == [1, 1, 1]


def _packages(roots: dict[str, Path]) -> dict[str, Path]:
    """Every module of the given top-level packages, by dotted name (generated stubs
    aside)."""
    mods = {}
    for root in roots.values():
        for f in root.rglob("*.py"):
            parts = list(f.relative_to(root.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if not any("_pb2" in p for p in parts):
                mods[".".join(parts)] = f
    return mods


def _load_time_imports(name: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The modules of ``mods`` that ``name`` imports while it loads: statements at
    module level (inside if/try too), not those in functions (deliberately lazy) or
    under `if TYPE_CHECKING`."""
    def owner(dotted: str) -> str:
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted

    out = set()
    nodes: list[ast.stmt] = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        nodes += [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))] \
            if isinstance(node, (ast.If, ast.Try)) else [node]
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {owner(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                base = f"{pkg}.{base}" if base else pkg
            out |= {owner(f"{base}.{a.name}") or owner(base) for a in node.names}
    out.discard("")
    out.discard(name)
    return out


def _cycles(roots: dict[str, Path]) -> list[list[str]]:
    """The strongly connected components of more than one module in the load-time
    import graph (Tarjan)."""
    mods = _packages(roots)
    edges = {m: _load_time_imports(m, f, mods) for m, f in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(mods):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    """Issue #53: no module of the core, the operator's package or a service imports,
    while it loads, a module that imports it back (directly or round a longer loop)."""
    roots = {"lawlab": CORE, "lawlab_ops": OPS,
             **{s: ROOT / "services" / s.removeprefix("lawlab_") / s for s in SERVICES}}
    assert len(_packages(roots)) > 150
    assert _cycles(roots) == []


def test_the_cycle_check_finds_a_cycle(tmp_path):
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from demo.sub import b\n")
    (pkg / "sub" / "b.py").write_text("from .. import c\n")
    (pkg / "c.py").write_text("import demo.a\n")
    (pkg / "d.py").write_text("def f():\n    import demo.a\n")  # lazy: no edge
    (pkg / "e.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    import demo.f\n")
    (pkg / "f.py").write_text("import demo.e\n")
    assert _cycles({"demo": pkg}) == [["demo.a", "demo.c", "demo.sub.b"]]
