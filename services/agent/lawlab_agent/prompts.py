"""Prompts (our own words) for the Real and Parallel settings (paper B.1).

Everything a model needs is generated from the task's metadata and caps: the
reply format, what each tool does and returns, what the sandbox preloads (with
shapes), the submission contract with a worked example for the task's type,
how a multi-group law is scored on unseen groups, every cap by name and value,
and in Parallel the experiment format, limits, clipping and where results go.
``tests/unit/test_prompts.py`` holds the checklist of these facts.
"""

from __future__ import annotations

from lawlab.tasks.library import SolverTask, Variable

OUTPUT_CHARS = 16_000  # printed output returned per <python> call (the sandbox's cap)
PYTHON_SECONDS = 100  # wall time per <python> call
ALLOWED_IMPORTS = ("numpy", "scipy", "sklearn", "pandas", "math", "statistics", "itertools",
                   "functools", "collections", "warnings")


def _variables(task: SolverTask, with_ranges: bool, label: str = "training") -> str:
    lines = []
    for v in task.inputs:
        rng = f", {label} range [{v.min:.6g}, {v.max:.6g}]" if with_ranges else ""
        lines.append(f"- {v.name} ({v.unit or 'dimensionless'}): {v.description}{rng}")
    return "\n".join(lines)


def _multi(task: SolverTask) -> bool:
    return task.multi_group


def caps_text(task: SolverTask, parallel: bool) -> str:
    c = task.caps
    lines = [
        f"- max_turns = {c.max_turns}: replies you may send; the last accepts only <final_formula>",
        f"- max_law_constants = {c.max_law_constants}: entries of LAW_CONSTANTS",
    ]
    if _multi(task):
        lines += [f"- max_local_params = {c.max_local_params}: entries of LOCAL_FITTABLE "
                  "(parameters refitted for each group)",
                  f"- fit_timeout_seconds = {c.fit_timeout_seconds:g}: wall time of one fit() call"]
        if c.max_init_size_per_param > 1:  # an official task's cap (lawlab's own: one)
            lines.append(f"- max_init_size_per_param = {c.max_init_size_per_param}: starts a "
                         "LOCAL_FITTABLE \"init\" list may hold")
    else:
        lines.append("- max_local_params = 0: this task has one global law (LOCAL_FITTABLE "
                     "stays empty, no fit())")
    if parallel:
        lines += [f"- max_experiment_calls = {c.max_experiment_calls}: successful <experiment> "
                  "calls (a refused or malformed one is not counted)",
                  f"- max_points_per_call = {c.max_points_per_call}: points per call",
                  f"- samples per point: from min_samples_per_point = {c.min_samples_per_point} "
                  f"to max_samples_per_point = {c.max_samples_per_point} (n_samples)"]
    return "\n".join(lines)


def _python_tool(task: SolverTask, parallel: bool) -> str:
    names = ", ".join(v.name for v in task.inputs)
    k = len(task.inputs)
    rows = "the observations you have bought so far (none at the start)" if parallel else \
        "the training observations"
    group = ("\n  group_ids_train  numpy array of shape (n,): the group of each row (strings)"
             if _multi(task) else "")
    return (
        "<python>code</python> runs Python in a sandbox and returns what the code prints.\n"
        "Every call starts a fresh process: variables, functions and imports do NOT persist "
        "between calls, so each call must define everything it uses. Preloaded in every call:\n"
        "  np, pd, scipy   numpy, pandas, scipy\n"
        f"  train_df        pandas DataFrame of {rows}: columns {task.target.name}, {names}"
        + (", group_id" if _multi(task) else "") + " (n rows)\n"
        f"  X_train         numpy array of shape (n, {k}): the inputs in the order of input_cols\n"
        f"  y_train         numpy array of shape (n,): the target {task.target.name}\n"
        f"  input_cols      {[v.name for v in task.inputs]!r}\n"
        f"  target_col      {task.target.name!r}" + group + "\n"
        f"Only printed output comes back (print what you need), cut after {OUTPUT_CHARS:,} "
        f"characters; each call may run for {PYTHON_SECONDS} s. Allowed imports: "
        + ", ".join(ALLOWED_IMPORTS) + ". There is no network and no file to read.\n"
        "Fit constants with vectorised least squares (scipy.optimize.least_squares or "
        "curve_fit, or numpy.linalg.lstsq for linear parameters) rather than brute-force grid "
        "searches, which are slow and run out of time.")


def _experiment_tool(task: SolverTask) -> str:
    c = task.caps
    names = [v.name for v in task.inputs]
    example = {n: [round(v.min, 4), round((v.min + v.max) / 2, 4)] for n, v in
               zip(names, task.inputs)}
    body = ", ".join(f'"{n}": {vals}' for n, vals in example.items())
    group = ""
    if _multi(task):
        first = task.group_ids[0] if task.group_ids else "G1"
        body += f', "group_id": ["{first}", "{first}"]'
        group = ("A \"group_id\" list (one group per point) says which group to measure; "
                 "groups are the ones listed in the problem. ")
    return (
        f"<experiment>{{{body}, \"n_samples\": {c.max_samples_per_point}}}</experiment> "
        "measures the system at the points you choose: one list per input, all of the same "
        f"length (at most {c.max_points_per_call} points per call), and n_samples repeated "
        f"noisy measurements per point ({c.min_samples_per_point} to "
        f"{c.max_samples_per_point}). {group}The body is strict JSON. You may make at most "
        f"{c.max_experiment_calls} successful calls; a refused call is not counted. Points "
        "outside the supported range of an input are clipped to it, and the reply says which "
        "were clipped. The measurements are appended to train_df, X_train and y_train for all "
        "later <python> calls; the reply shows the first rows and a summary of the batch.")


def _contract(task: SolverTask) -> str:
    c = task.caps
    multi = _multi(task)
    rules = [
        "USED_INPUTS: the input columns your law uses; predict receives X with exactly these "
        "columns, in this order.",
        f"LAW_CONSTANTS: your fitted global constants (at most {c.max_law_constants}), "
        "with their fitted values.",
        "OTHER_CONSTANTS: physical constants or fixed numbers your law uses ({} if none).",
    ]
    if multi:
        rules += [
            f"LOCAL_FITTABLE: the parameters that take a different value in each group (at "
            f"most {c.max_local_params}), each with a starting value: {{\"name\": {{\"init\": "
            "value}}.",
            "fit(X, y, **LAW_CONSTANTS) receives one group's rows and returns {name: value} for "
            f"every LOCAL_FITTABLE entry, within {c.fit_timeout_seconds:g} s.",
            "predict(X, **LAW_CONSTANTS, **OTHER_CONSTANTS, **local_values) returns an array of "
            "shape (n,). It never sees a group id.",
        ]
    else:
        rules += [
            "LOCAL_FITTABLE = {} and no fit(): the task has one global law.",
            "predict(X, **LAW_CONSTANTS, **OTHER_CONSTANTS) returns an array of shape (n,).",
        ]
    rules += [
        "Only numpy, scipy and math may be imported. Non-finite or wrongly shaped predictions "
        "score 0.",
        "Write a law, not a table: lookup tables, interpolation between stored points "
        "(np.interp, scipy.interpolate, searchsorted, digitize), copied data statistics, data "
        "kept between fit() and predict(), or more numbers than the caps allow (plus 3 for unit "
        "conversions) fail the validity gate and score S_V = 0. Numbers written in text "
        "(strings holding digits, parsing text) are refused.",
        "On real data every number your law uses (declared constants, OTHER_CONSTANTS, "
        "literals in predict and helpers; not small integers, simple fractions or physical "
        "constants) is refitted on the training data before scoring, so fit it there. A "
        "submission's exception is reported by its class only.",
    ]
    return "Submission contract (a Python module inside <final_formula>):\n" + "\n".join(
        f"- {r}" for r in rules)


def _example(task: SolverTask) -> str:
    x = task.inputs[0].name
    if _multi(task):
        return f'''Example of a complete multi-group submission (a saturating curve whose level
differs between groups):
<final_formula>
import numpy as np
from scipy.optimize import least_squares

USED_INPUTS = ["{x}"]
LAW_CONSTANTS = {{"k": 0.42}}
OTHER_CONSTANTS = {{}}
LOCAL_FITTABLE = {{"a": {{"init": 10.0}}}}


def predict(X, k, a):
    x = X[:, 0]
    return a * (1.0 - np.exp(-k * x))


def fit(X, y, k):
    def residuals(theta):
        return predict(X, k, theta[0]) - y
    sol = least_squares(residuals, [LOCAL_FITTABLE["a"]["init"]])
    return {{"a": float(sol.x[0])}}
</final_formula>'''
    return f'''Example of a complete submission (a power law with two fitted constants):
<final_formula>
import numpy as np

USED_INPUTS = ["{x}"]
LAW_CONSTANTS = {{"a": 2.31, "b": 0.74}}
OTHER_CONSTANTS = {{}}
LOCAL_FITTABLE = {{}}


def predict(X, a, b):
    x = X[:, 0]
    return a * x ** b
</final_formula>'''


def _scoring(task: SolverTask, parallel: bool) -> str:
    if parallel:
        text = ("Scoring: your law is compared with the system's hidden law: how much of its "
                "structure you recovered (its variables and trend, the published form it "
                "builds on, the added terms and, with groups, which parameters vary per group).")
    else:
        text = (f"Scoring: {task.metric} of your predictions on held-out observations, relative "
                "to the best published formula for this problem (matching it scores 0.5, a "
                "perfect law 1.0), and a validity rubric of scientific checks (signs, trends, "
                "limits, scaling) probed across the input ranges.")
    if _multi(task) and not parallel:
        text += (" The law is scored on groups it has never seen: for each new group, fit() is "
                 "called on part of that group's rows (its fit window) and predict() on the "
                 "rest of them. So the shape of the law must be shared by all groups, and only "
                 "the few LOCAL_FITTABLE parameters may change from group to group.")
    elif _multi(task):
        text += (" The shape of the law must be shared by all groups: the judge refits only "
                 "the few LOCAL_FITTABLE parameters for each group (your fit() is called on "
                 "each group's measurements), so which parameters vary per group is part of "
                 "the structure.")
    return text


def system_prompt(task: SolverTask, parallel: bool) -> str:
    c = task.caps
    setting = ("You start with no data: you design experiments on a system, measure it, and "
               "find the law that governs it." if parallel else
               "You analyse a fixed set of real observations and find the law behind them.")
    tools = [_python_tool(task, parallel)]
    if parallel:
        tools.append(_experiment_tool(task))
    tools.append("<final_formula>module</final_formula> submits your law and ends the trial"
                 + (" (only after at least one successful <experiment>)." if parallel else "."))
    return "\n\n".join([
        "You are a scientist discovering a closed-form law. " + setting,
        "How to reply: each reply is exactly one tool block and nothing else: no prose before "
        "or after it, no Markdown code fences around it. If a reply holds several blocks, only "
        "the first one runs. A reply without a block costs the turn.",
        "Tools:\n" + "\n\n".join(tools),
        f"Turns: you have {c.max_turns} replies. The last one accepts only <final_formula>; if "
        "that submission cannot be read as a Python module you get one more reply to fix it. "
        "A failed tool call (an error, a timeout, a refused experiment) returns its error and "
        "the trial goes on.",
        "Caps:\n" + caps_text(task, parallel),
        _contract(task),
        _example(task),
        _scoring(task, parallel),
    ])


def user_prompt(task: SolverTask, parallel: bool,
                heldout: list[Variable] | None = None) -> str:
    multi = _multi(task)
    parts = [
        f"Problem: {task.title}\n\n{task.context}",
        f"Target: {task.target.name} ({task.target.unit or 'dimensionless'}): "
        f"{task.target.description}",
        "Inputs:\n" + _variables(task, with_ranges=True,
                                  label="supported" if parallel else "training"),
    ]
    if multi:
        parts.append(f"Groups ({task.group_description}): {', '.join(task.group_ids)}. Groups "
                     "share one functional form; declared local parameters vary per group.")
    if task.priors:  # an imported official task's, as the paper's prompt shows them
        parts.append("Candidate constants from the literature (some may not apply to this "
                     "data):\n" + "\n".join(f"- {p}" for p in task.priors))
    if heldout and not parallel:
        parts.append("Your law will be scored on held-out inputs in these ranges:\n" + "\n".join(
            f"- {v.name}: [{v.min:.6g}, {v.max:.6g}]" for v in heldout))
    parts.append("Reply with one tool block.")
    return "\n\n".join(parts)


FORCED = ("This is your final turn: only <final_formula> will be accepted. Submit your best law "
          "now.")
FORCED_RETRY = ("Your final submission could not be read as a Python module ({error}). This is "
                "your one retry: reply with a corrected <final_formula> only.")
