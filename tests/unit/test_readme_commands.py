"""README.md's command list stays true to the command line: every verb the CLI has
is listed, and every verb and flag listed exists (argparse is the source)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from lawlab_ops.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"
# `lawlab serve NAME ...` hands its flags to the service's own parser
FORWARDED = {"serve"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings}


def _listed(text: str) -> list[list[str]]:
    block = text[text.index("## Command line"):]
    block = block[:block.index("\n## ", 1)]
    return [line.split("#")[0].split() for line in block.splitlines()
            if line.startswith("    lawlab ")]


def _alternatives(words: list[str]) -> list[list[str]]:
    """`status ID [--watch] | trials ID | list`: each alternative starts with a verb."""
    out, current = [], []
    for w in words:
        if w == "|":
            out.append(current)
            current = []
        else:
            current.append(w)
    return [*out, current]


def problems(text: str) -> list[str]:
    commands = _subparsers(build_parser())
    seen: dict[str, set[str]] = {}
    found = []
    for words in _listed(text):
        command = words[1]
        if command not in commands:
            found.append(f"`lawlab {command}` does not exist")
            continue
        seen.setdefault(command, set())
        verbs = _subparsers(commands[command])
        for alt in _alternatives(words[2:]) if verbs else [words[2:]]:
            target = commands[command]
            if verbs:
                names = [v for v in alt[0].strip("<>[]").split("|") if v in verbs] if alt else []
                if not names:
                    found.append(f"`lawlab {command} {' '.join(alt[:1])}` is not a verb "
                                 f"({sorted(verbs)})")
                    continue
                seen[command].update(names)
                target = verbs[names[0]]
                kinds = _subparsers(target)
                if kinds and len(alt) > 1 and alt[1] in kinds:
                    target = kinds[alt[1]]
            if command in FORWARDED:
                continue
            for flag in re.findall(r"--[a-z][a-z-]*", " ".join(alt)):
                if flag not in _flags(target):
                    found.append(f"`lawlab {command} ... {flag}` does not exist")
    found += [f"`lawlab {c}` is not in the list" for c in sorted(set(commands) - set(seen))]
    for command, parser in commands.items():
        missing = set(_subparsers(parser)) - seen.get(command, set())
        found += [f"`lawlab {command} {v}` is not in the list" for v in sorted(missing)]
    return found


def test_every_verb_is_listed_and_every_listed_flag_exists():
    assert problems(README.read_text()) == []


def test_the_check_catches_an_invented_flag_verb_and_a_missing_command():
    text = README.read_text()
    assert problems(text.replace("    lawlab tasks list", "    lawlab tasks list --colour", 1)) \
        == ["`lawlab tasks ... --colour` does not exist"]
    assert "`lawlab tasks frobnicate` is not a verb" in " ".join(
        problems(text.replace("    lawlab tasks list", "    lawlab tasks frobnicate", 1)))
    without_fit = "\n".join(line for line in text.splitlines()
                            if not line.startswith("    lawlab fit "))
    assert "`lawlab fit` is not in the list" in problems(without_fit)
