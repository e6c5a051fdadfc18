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
from dataclasses import dataclass, field, replace

from lawlab.tasks.library import SolverTask

CONTEXTS = ("full", "no_var_detail", "anonymous_names", "numeric_only")


@dataclass
class View:
    context: str
    task: SolverTask  # what the solver sees
    to_task: dict[str, str] = field(default_factory=dict)  # solver name -> task name

    @property
    def to_solver(self) -> dict[str, str]:
        return {v: k for k, v in self.to_task.items()}

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


def make_view(task: SolverTask, context: str = "full") -> View:
    context = context or "full"
    if context not in CONTEXTS:
        raise ValueError(f"unknown context {context!r}; one of {', '.join(CONTEXTS)}")
    if context == "full":
        return View(context, task)
    target = replace(task.target, description="")
    inputs = [replace(v, description="") for v in task.inputs]
    if context == "no_var_detail":
        return View(context, replace(task, target=replace(target, unit=""),
                                     inputs=tuple(replace(v, unit="") for v in inputs)))
    view = View(context, task)
    view.to_task["y"] = task.target.name
    target = target.renamed("y")
    for i, v in enumerate(task.inputs, 1):
        view.to_task[f"x{i}"] = v.name
    inputs = [v.renamed(f"x{i}") for i, v in enumerate(inputs, 1)]
    seen = replace(task, target=target, inputs=tuple(inputs))
    if context == "numeric_only":
        seen = replace(
            seen, title="an unknown system", discipline="",
            context=("Find a closed-form law for y as a function of the inputs. Nothing "
                     "is known about the system beyond the data."),
            group_description="groups" if seen.group_description else "",
            target=replace(target, unit=""), inputs=tuple(replace(v, unit="") for v in inputs))
    view.task = seen
    return view
