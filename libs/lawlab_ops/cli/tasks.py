"""``lawlab tasks``: build, check, show and catalogue the task library."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from lawlab import config
from lawlab_ops.cli.common import with_dirs
from lawlab_ops.tables import table as _table


def cmd_tasks_build(args: argparse.Namespace) -> int:
    from lawlab.rpc import log
    from lawlab_ops.taskbuild.build import build_all

    log.setup("taskbuild", "WARNING")
    out = Path(args.out)
    print(f"building the task library into {out} ...", flush=True)
    start = time.perf_counter()
    proposer = None
    if args.llm_base_url:
        from lawlab_ops.taskbuild.llm_variants import openai_proposer

        if not args.llm_model:
            print("lawlab tasks build: --llm-model is required with --llm-base-url", file=sys.stderr)
            return 2
        proposer = openai_proposer(args.llm_base_url, args.llm_model)
    from lawlab.worlds import worldkey

    key_path = worldkey.default_path(out)
    try:
        if args.public:
            key, created = worldkey.write_public(key_path)
        else:
            key, created = worldkey.load_or_create(key_path)
    except worldkey.WorldKeyError as err:
        print(f"lawlab tasks build: {err}", file=sys.stderr)
        return 2
    print(f"world key {key.fingerprint} ({'created' if created else 'read'}: {key_path}; "
          + ("the PUBLIC development key: anyone can rebuild these worlds" if args.public else
             "keep it secret, the simulator needs it") + ")", flush=True)
    from lawlab_ops.taskbuild.build import private_variants_path

    variants = Path(args.variants) if args.variants else private_variants_path(out)
    if args.variants and not variants.exists():
        print(f"lawlab tasks build: --variants {variants}: no such file", file=sys.stderr)
        return 2
    print(private_note(variants, args.public), flush=True)
    done = [0]

    def progress(result: dict[str, Any]) -> None:
        # which mechanisms a world has is the answer key's: the console says only
        # whether the task got one
        done[0] += 1
        world = ("-" if result.get("type") not in ("I", "II") else
                 "world" if result.get("hidden_edit") != "(no world)" else "NO WORLD")
        print(f"  [{done[0]:>2}] {result['task_id']:<32} {world:<10} "
              f"{result.get('seconds', 0):>6.1f} s", flush=True)

    try:
        summary = build_all(out, args.only or None, proposer, key,
                            processes=args.processes, progress=progress,
                            variants=variants if variants.exists() else None)
    except ValueError as err:
        print(f"lawlab tasks build: {err}", file=sys.stderr)
        return 2
    real = [s for s in summary if s.get("type") in ("I", "II")]
    worlds = [s for s in real if s.get("hidden_edit") != "(no world)"]
    print(f"built {len(summary)} tasks ({len(worlds)} of {len(real)} real-data tasks with a "
          f"Parallel world) in {time.perf_counter() - start:.0f} s")
    return 0


def private_note(variants: Path, public: bool) -> str:
    """What `lawlab tasks build` (and `make tasks`) says about private variants (#50)."""
    if variants.exists():
        return f"private variants: {variants} (they join the keyed draw)"
    if public:
        return ("no private variants: the public development release (its key is published; "
                "epochs on it are development epochs: lawlab epoch open NAME --development)")
    return (f"NO PRIVATE VARIANTS ({variants} does not exist): every hidden law will be among "
            "the repository's public candidates, so this library is a DEVELOPMENT release: "
            "`lawlab epoch open` refuses it without --development. For a leaderboard write at "
            "least one private variant per task there (docs/simulator-api.md, 'Private "
            "variants') and rebuild")


def cmd_tasks_validate(args: argparse.Namespace) -> int:
    from lawlab_ops.taskbuild.validate import validate_library

    reports, manifest_problems = validate_library(Path(args.tasks_dir))
    bad = [r for r in reports if not r.ok]
    for r in reports:
        if r.ok:
            print(f"ok    {r.task_id} ({r.checks} checks)")
        else:
            print(f"FAIL  {r.task_id}")
            for p in r.problems:
                print(f"      - {p}")
    for p in manifest_problems:
        print(f"FAIL  MANIFEST: {p}")
    print(f"{len(reports) - len(bad)} of {len(reports)} tasks valid"
          f"{'; MANIFEST matches' if not manifest_problems else '; MANIFEST problems above'}")
    return 0 if not bad and not manifest_problems else 1


def cmd_tasks_audit(args: argparse.Namespace) -> int:
    from lawlab.judging import validity
    from lawlab.tasks.library import TaskLibrary
    from lawlab_ops.taskbuild.controls import rubric_audit

    library = TaskLibrary(Path(args.tasks_dir))
    if args.labels or args.judges_md:
        from lawlab_ops.taskbuild import validity_labels

        block = validity_labels.markdown(validity_labels.score_all(library))
        if args.judges_md:
            path = Path(args.judges_md)
            path.write_text(validity_labels.replace_block(path.read_text(), block))
            print(f"wrote the labelled sets into {path}")
        else:
            print(block)
        return 0
    specs = {}
    if args.specs:
        from lawlab.tasks.specs import load_specs

        specs = {s.task_id: s.rubric for s in load_specs()}
    ids = args.only or [t.task_id for t in library if t.meta.suite == "real"]
    unknown = [i for i in ids if i not in library]
    if unknown:
        print(f"lawlab tasks audit: no task {unknown[0]!r} (see lawlab tasks list)", file=sys.stderr)
        return 2
    trouble = 0
    constant_scores = []
    for task_id in ids:
        task = library.get(task_id)
        audits = rubric_audit(task, specs.get(task_id))
        n = len(audits[0].verdicts)
        print(f"{task_id} ({n} items)")
        for audit in audits:
            s_v = validity.s_v(audit.verdicts, True)
            must_pass = "(best)" in audit.law or audit.law == "hidden law"
            bad = must_pass and audit.passed < n
            trouble += bad
            if audit.law == "constant":
                constant_scores.append(s_v)
            print(f"  {'!! ' if bad else '   '}{audit.law:<42} S_V {s_v:.3f}")
            for v in audit.verdicts:
                if args.failures and v.passed:
                    continue
                print(f"        {'pass' if v.passed else 'FAIL'} {v.item_id}: {v.evidence[:160]}")
    if constant_scores:
        print(f"constant control: mean S_V {sum(constant_scores) / len(constant_scores):.3f} over "
              f"{len(constant_scores)} tasks; {trouble} reference or hidden-law rubric failures")
    return 0 if not trouble else 1


def cmd_tasks_show(args: argparse.Namespace) -> int:
    from lawlab.tasks.library import TaskLibrary

    library = TaskLibrary(Path(args.tasks_dir))
    if args.task_id not in library:
        print(f"lawlab tasks show: no task {args.task_id!r} (see lawlab tasks list)", file=sys.stderr)
        return 2
    task = library.get(args.task_id)
    m = task.meta
    print(f"{m.task_id}: {m.title}\n")
    print(f"discipline {m.discipline}; Type {m.type_label}"
          f"{f' (groups: {m.group_description}, {len(task.group_ids)})' if m.multi_group else ''};"
          f" metric {m.metric}; {len(task.train)} training rows")
    print(f"split: {m.split_kind}: {m.split_rationale}\n")
    print(m.context, "\n")
    rows = [[v.name, v.symbol, v.unit, f"{v.min:.4g}", f"{v.max:.4g}", v.description]
            for v in (m.target, *m.inputs)]
    print(_table(rows, ["variable", "symbol", "unit", "min", "max", "description"]))
    c = m.caps
    print(f"\ncaps: max_law_constants {c.max_law_constants}, max_local_params "
          f"{c.max_local_params}, fit_timeout_seconds {c.fit_timeout_seconds:g}, max_turns "
          f"{c.max_turns}"
          + (f"; Parallel: max_experiment_calls {c.max_experiment_calls}, max_points_per_call "
             f"{c.max_points_per_call}, samples per point {c.min_samples_per_point}-"
             f"{c.max_samples_per_point}" if task.has_world() else "; no Parallel world"))
    print(f"rubric: {len(task.rubric())} validity items (lawlab tasks audit --only {m.task_id})")
    print(f"\nsource: {m.source}\nlicence: {m.license}")
    if args.answer_key:
        print("\n-- answer key (operators only) --")
        metrics_ = json.loads((task.root / "eval" / "reference_metrics.json").read_text())
        for r in task.references():
            held = metrics_["references"][r.name]["heldout_metric"]
            mark = " (best)" if r.name == metrics_["best_reference"] else ""
            print(f"reference {r.name}{mark}: {r.expr}   held-out {m.metric} {held:.4g}")
            print(f"    {r.citation}")
        print(f"naive baseline: {metrics_['naive_baseline']:.4g}")
        for item in task.rubric():
            print(f"rubric {item['id']}: {item.get('description', '')}")
        if task.has_world():
            law = task.hidden_law()
            print(f"hidden law: {law.expr}\n    {law.rationale}")
    return 0


def cmd_tasks_fingerprint(args: argparse.Namespace) -> int:
    """The public fingerprint of a world key (never the key itself)."""
    from lawlab.worlds import worldkey

    path = Path(args.key) if args.key else worldkey.default_path(Path(args.tasks_dir))
    try:
        key = worldkey.load(path)
    except worldkey.WorldKeyError as err:
        print(f"lawlab tasks fingerprint: {err}", file=sys.stderr)
        return 2
    print(key.fingerprint)
    return 0


def cmd_tasks_catalogue(args: argparse.Namespace) -> int:
    from lawlab_ops.taskbuild.catalogue import catalogue, worlds_catalogue

    text = catalogue(Path(args.tasks_dir))
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    elif not args.worlds_out:
        print(text, end="")
    if args.worlds_out:
        Path(args.worlds_out).write_text(worlds_catalogue(Path(args.tasks_dir)))
        print(f"wrote {args.worlds_out}")
    return 0


def cmd_tasks_import(args: argparse.Namespace) -> int:
    from lawlab_ops.taskbuild.importer import import_all

    formulas = Path(args.formulas) if args.formulas else None
    if formulas is not None and not formulas.is_dir():
        print(f"--formulas {formulas}: not a folder", file=sys.stderr)
        return 2
    reports = import_all(Path(args.source), Path(args.out), formulas)
    rows = []
    for r in reports:
        status = "converted" if r.ok else "FAILED"
        why = r.error or (r.problems[0] if r.problems else "")
        refs = f"{r.references_converted}/{r.references_total}" if not r.error else "-"
        rubric = f"{r.rubric_executable}+{r.rubric_llm}" if not r.error else "-"
        rows.append([r.task_id, status, refs, rubric, why[:90]])
    print(_table(rows, ["task", "status", "references", "rubric exec+llm", "why not"]))
    for r in reports:
        print(f"\n{'ok  ' if r.ok else 'FAIL'}  {r.task_id}  ({r.source})")
        if r.error:
            print(f"      import failed: {r.error}")
        for line in r.converted:
            print(f"      converted: {line}")
        for line in r.unconvertible:
            print(f"      NOT converted: {line}")
        for line in r.notes:
            print(f"      note: {line}")
        for line in r.problems:
            print(f"      validation: {line}")
    good = sum(r.ok for r in reports)
    print(f"\nimported {good} of {len(reports)} tasks into {args.out}"
          + (f"; {len(reports) - good} failed" if good < len(reports) else ""))
    return 0 if reports and good == len(reports) else 1


def cmd_tasks_fetch(args: argparse.Namespace) -> int:
    from lawlab_ops.taskbuild.importer import FetchError, fetch_release

    try:
        tasks, count = fetch_release(Path(args.out), args.repo, args.revision)
    except FetchError as err:
        print(f"lawlab tasks fetch: {err}", file=sys.stderr)
        return 1
    print(f"fetched {count} task folders into {tasks}\nnext: lawlab tasks import {tasks} "
          "--formulas DIR --out var/official  (the release ships no reference modules: "
          "docs/tasks.md)")
    return 0 if count else 1


def cmd_tasks_list(args: argparse.Namespace) -> int:
    from lawlab.tasks.library import TaskLibrary

    library = TaskLibrary(Path(args.tasks_dir))
    chosen = [t for t in library if not args.suite or t.meta.suite == args.suite]
    if not chosen:
        suites = sorted({t.meta.suite for t in library})
        print(f"error: no task in suite {args.suite!r} (suites: {', '.join(suites)})",
              file=sys.stderr)
        return 2
    rows = [[t.task_id, t.meta.suite, "real, parallel" if t.has_world() else "real",
             t.meta.type_label, t.meta.discipline, t.meta.metric, len(t.train),
             len(t.group_ids) or "-", ", ".join(t.meta.input_names)] for t in chosen]
    print(_table(rows, ["task", "suite", "settings", "type", "discipline", "metric",
                        "train rows", "groups", "inputs"]))
    counts = Counter(t.meta.suite for t in chosen)
    print(f"{len(chosen)} tasks: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return 0


def cmd_tasks_lsr_solve(args: argparse.Namespace) -> int:
    """Re-run LSR-Transform's one machine-dependent step: sympy's closed-form solve of
    every equation for every variable, time-limited, recorded for the builder."""
    from lawlab_ops.taskbuild import lsr_transform

    start = time.monotonic()
    record = lsr_transform.solve_all(args.seconds, args.workers, progress=True)
    record["wall_seconds"] = round(time.monotonic() - start, 1)
    out = Path(args.out) if args.out else lsr_transform.SOLUTIONS_FILE
    out.write_text(json.dumps(record, indent=1) + "\n")
    statuses: Counter[str] = Counter(r["status"] for r in record["results"].values())
    print(f"wrote {out}: " + ", ".join(f"{n} {s}" for s, n in statuses.most_common())
          + f" ({record['wall_seconds']} s); `make tasks` rebuilds the suite from it")
    return 0



def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tasks = sub.add_parser("tasks", help="the task library").add_subparsers(dest="verb", required=True)
    p = tasks.add_parser("list", help="the tasks, with their settings (and a count per suite)")
    with_dirs(p)
    p.add_argument("--suite", default="",
                   help="only this suite: real, lsr-transform or lsr-synth")
    p.set_defaults(func=cmd_tasks_list)
    p = tasks.add_parser("lsr-solve", help="re-record sympy's solutions for LSR-Transform "
                         "(minutes; the builder reads the record)")
    p.add_argument("--seconds", type=float, default=20.0, help="time limit per solve")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default="", help="default: the record the builder reads")
    p.set_defaults(func=cmd_tasks_lsr_solve)
    p = tasks.add_parser("validate", help="check every task's files and claims")
    with_dirs(p)
    p.set_defaults(func=cmd_tasks_validate)
    p = tasks.add_parser("audit", help="every rubric item for the references, the hidden law and "
                                       "a constant (what S_V can tell apart)")
    with_dirs(p)
    p.add_argument("--only", nargs="*", help="task ids (default: every real-data task)")
    p.add_argument("--specs", action="store_true",
                   help="judge the rubrics of the task specifications in the source tree "
                        "(task_specs/*.yaml) instead of the built ones")
    p.add_argument("--failures", action="store_true", help="print only the failing verdicts")
    p.add_argument("--labels", action="store_true",
                   help="S_V of the labelled wrong-mechanism and right-but-weak laws (Markdown)")
    p.add_argument("--judges-md", help="write that table into this file's labelled-sets block "
                                       "(docs/judges.md)")
    p.set_defaults(func=cmd_tasks_audit)
    p = tasks.add_parser("show", help="one task's metadata (--answer-key: references, law)")
    with_dirs(p)
    p.add_argument("task_id")
    p.add_argument("--answer-key", action="store_true")
    p.set_defaults(func=cmd_tasks_show)
    p = tasks.add_parser("fingerprint", help="the public fingerprint of the world key (the suite)")
    with_dirs(p)
    p.add_argument("--key", help="a world key file (default: LAWLAB_WORLD_KEY_FILE, or world-key "
                                 "beside the task library)")
    p.set_defaults(func=cmd_tasks_fingerprint)
    p = tasks.add_parser("catalogue", help="the Markdown catalogue of the library (docs/tasks.md)")
    with_dirs(p)
    p.add_argument("--out")
    p.add_argument("--worlds-out", help="also the mechanism catalogue (docs/worlds.md)")
    p.set_defaults(func=cmd_tasks_catalogue)
    p = tasks.add_parser("fetch", help="download the official SciLaws-Bench release's task "
                                       "folders from the Hugging Face hub (or its local cache "
                                       "with HF_HUB_OFFLINE=1)")
    p.add_argument("--out", default="var/scilaws", help="the tasks land in OUT/tasks")
    p.add_argument("--repo", default="RealSR/SciLaws-Bench")
    p.add_argument("--revision", help="a branch, tag or commit of the dataset (default main)")
    p.set_defaults(func=cmd_tasks_fetch)
    p = tasks.add_parser("import", help="convert official SciLaws-Bench task folders")
    p.add_argument("source", help="a task folder or a folder of task folders")
    p.add_argument("--out", default="var/imported", help="where converted tasks go")
    p.add_argument("--formulas", help="a folder holding <task>/formulas/<reference id>.py: the "
                                      "published reference modules, which the Hugging Face "
                                      "release does not ship")
    p.set_defaults(func=cmd_tasks_import)
    p = tasks.add_parser("build", help="build the task library (data, references, rubrics, "
                                       "Parallel worlds under the world key)")
    p.add_argument("--out", default=str(config.tasks_dir()))
    p.add_argument("--only", nargs="*")
    p.add_argument("--processes", type=int, default=None,
                   help="tasks built at once (default: the cores)")
    p.add_argument("--llm-base-url", help="optional: an OpenAI-compatible endpoint that proposes "
                                          "hidden-law variants into the same screen")
    p.add_argument("--llm-model", help="model name for --llm-base-url (key: LAWLAB_LLM_API_KEY)")
    p.add_argument("--variants", help="the operator's private variants (default: "
                                      "world-variants.yaml beside the world key, if present)")
    p.add_argument("--public", action="store_true",
                   help="build with lawlab's published development key (the release the docs "
                        "describe; reproducible by anyone, never for a leaderboard)")
    p.set_defaults(func=cmd_tasks_build)
