"""Context ablations: what of a task the solver is shown.

- ``full``: title, context, variable names, units and descriptions.
- ``no_var_detail``: title, context and variable names; no units, no descriptions.
- ``anonymous_names``: title and context; variables renamed ``x1..xn`` and ``y``
  (units kept, descriptions dropped), so the context cannot be matched to the
  columns by name.
- ``numeric_only``: nothing but anonymous columns, their ranges and the data
  (the setting of classical symbolic regression).

Renaming is applied at the harness boundary: the sandbox data, experiment
payloads and results, and the previews are in the solver's names; a
submission's ``USED_INPUTS`` is mapped back to the task's names before it is
scored, so scorer and judge are unchanged. Group ids are never renamed.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from lawlab.common.v1 import common_pb2

CONTEXTS = ("full", "no_var_detail", "anonymous_names", "numeric_only")


@dataclass
class View:
    context: str
    task: common_pb2.TaskMetadata  # what the solver sees
    to_task: dict[str, str] = field(default_factory=dict)  # solver name -> task name

    @property
    def to_solver(self) -> dict[str, str]:
        return {v: k for k, v in self.to_task.items()}

    def rename_table(self, table: common_pb2.Table) -> common_pb2.Table:
        """A table in the task's names -> the solver's names."""
        if not self.to_task:
            return table
        out = common_pb2.Table()
        out.CopyFrom(table)
        names = self.to_solver
        for col in out.columns:
            col.name = names.get(col.name, col.name)
        return out

    def task_name(self, solver_name: str) -> str:
        return self.to_task.get(solver_name, solver_name)

    def submission_for_scoring(self, source: str) -> str:
        """Map USED_INPUTS string literals back to the task's names."""
        if not self.to_task:
            return source
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return source  # the scorer reports the compile error
        spans: list[tuple[int, int, int, str]] = []
        for node in tree.body:
            value: ast.expr | None
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign):
                targets, value = [node.target], node.value
            else:
                continue
            if not any(isinstance(t, ast.Name) and t.id == "USED_INPUTS" for t in targets):
                continue
            if not isinstance(value, (ast.List, ast.Tuple)):
                continue
            for elt in value.elts:
                if (isinstance(elt, ast.Constant) and isinstance(elt.value, str)
                        and elt.value in self.to_task and elt.lineno == elt.end_lineno
                        and elt.end_col_offset is not None):
                    spans.append((elt.lineno, elt.col_offset, elt.end_col_offset,
                                  repr(self.to_task[elt.value])))
        lines = source.splitlines(keepends=True)
        for lineno, start, end, text in sorted(spans, reverse=True):
            raw = lines[lineno - 1].encode()
            lines[lineno - 1] = (raw[:start] + text.encode() + raw[end:]).decode()
        return "".join(lines)


def make_view(task: common_pb2.TaskMetadata, context: str = "full") -> View:
    context = context or "full"
    if context not in CONTEXTS:
        raise ValueError(f"unknown context {context!r}; one of {', '.join(CONTEXTS)}")
    seen = common_pb2.TaskMetadata()
    seen.CopyFrom(task)
    view = View(context, seen)
    if context == "full":
        return view
    for v in [seen.target, *seen.inputs]:
        v.description = ""
    if context == "no_var_detail":
        for v in [seen.target, *seen.inputs]:
            v.unit = ""
        return view
    view.to_task["y"] = task.target.name
    seen.target.name = "y"
    for i, v in enumerate(seen.inputs, 1):
        view.to_task[f"x{i}"] = v.name
        v.name = f"x{i}"
    if context == "numeric_only":
        seen.title = "an unknown system"
        seen.context = ("Find a closed-form law for y as a function of the inputs. Nothing "
                        "is known about the system beyond the data.")
        seen.discipline = ""
        seen.group_description = "groups" if seen.group_description else ""
        for v in [seen.target, *seen.inputs]:
            v.unit = ""
    return view
