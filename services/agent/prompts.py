"""Prompt templates (our own words) for the Real and Parallel settings."""

from __future__ import annotations

from lawlab.common.v1 import common_pb2


def _variables(task: common_pb2.TaskMetadata, with_ranges: bool) -> str:
    lines = []
    for v in task.inputs:
        rng = f", training range [{v.min:.6g}, {v.max:.6g}]" if with_ranges else ""
        lines.append(f"- {v.name} ({v.unit or 'dimensionless'}): {v.description}{rng}")
    return "\n".join(lines)


CONTRACT = """Submit a Python module inside <final_formula>...</final_formula> with:
USED_INPUTS = [...]        # the input columns your law uses, in the column order of X
LAW_CONSTANTS = {{...}}    # fitted global constants (at most {max_law} entries)
OTHER_CONSTANTS = {{}}
LOCAL_FITTABLE = {{...}}   # {type_clause}
def predict(X, **constants): ...   # X holds the USED_INPUTS columns; return shape (n,)
{fit_clause}
predict is called as predict(X, **LAW_CONSTANTS, **OTHER_CONSTANTS{local_call}). It never sees a
group id. Only numpy, scipy and math may be used. Non-finite or wrongly shaped predictions score 0."""


def system_prompt(task: common_pb2.TaskMetadata, parallel: bool) -> str:
    multi = task.type == common_pb2.TASK_TYPE_MULTI_GROUP
    caps = task.caps
    tools = [
        "<python>code</python>: runs Python in a sandbox with np, pd, scipy, train_df, X_train, "
        "y_train, input_cols, target_col" + (", group_ids_train" if multi else "")
        + " preloaded. Allowed imports: numpy, scipy, sklearn, pandas, math, statistics, "
        "itertools, functools, collections, warnings. 100 s per call; output is capped.",
    ]
    if parallel:
        tools.append(
            "<experiment>{\"input\": [values...], ..., \"n_samples\": k"
            + (", \"group_id\": [one per point]" if multi else "")
            + "}</experiment>: measures the system at the points you choose. At most "
            f"{caps.max_experiment_calls} successful calls, {caps.max_points_per_call} points per "
            f"call, {caps.min_samples_per_point} to {caps.max_samples_per_point} samples per "
            "point. Results are appended to train_df. Points outside the supported range are "
            "clipped and reported.")
    tools.append("<final_formula>module</final_formula>: your submission; ends the trial.")
    contract = CONTRACT.format(
        max_law=caps.max_law_constants,
        type_clause=(f"per-group parameters, at most {caps.max_local_params}: "
                     "{\"name\": {\"init\": value}}" if multi else "leave empty: one global law"),
        fit_clause=("def fit(X, y, **LAW_CONSTANTS): ... # returns {name: value} for "
                    f"LOCAL_FITTABLE, fitted on one group's rows within {caps.fit_timeout_seconds:g} s"
                    if multi else "Do not define fit()."),
        local_call=", **fitted_local_parameters" if multi else "")
    setting = ("You start with no data: design experiments on the system, then find its law."
               if parallel else "You analyse fixed real observations and find the law behind them.")
    return (
        "You are a scientist discovering a closed-form law. " + setting + "\n\n"
        "Each reply must contain exactly one tool block; only the first block is run.\n"
        + "\n".join(f"- {t}" for t in tools)
        + f"\n\nYou have at most {caps.max_turns} turns; the last one accepts only "
        "<final_formula>.\n\n" + contract)


def user_prompt(task: common_pb2.TaskMetadata, parallel: bool,
                heldout: list[common_pb2.Variable] | None = None) -> str:
    multi = task.type == common_pb2.TASK_TYPE_MULTI_GROUP
    parts = [
        f"Problem: {task.title}\n\n{task.context}",
        f"Target: {task.target.name} ({task.target.unit or 'dimensionless'}): "
        f"{task.target.description}",
        "Inputs:\n" + _variables(task, with_ranges=True),
    ]
    if multi:
        parts.append(f"Groups ({task.group_description}): {', '.join(task.group_ids)}. Groups "
                     "share one functional form; declared local parameters vary per group.")
    if heldout and not parallel:
        parts.append("Your law will be scored on held-out inputs in these ranges:\n" + "\n".join(
            f"- {v.name}: [{v.min:.6g}, {v.max:.6g}]" for v in heldout))
    parts.append(f"Scoring metric: {task.metric} on held-out data, relative to the best "
                 "published formula." if not parallel else
                 "Scoring: how much of the system's true structure your law recovers.")
    return "\n\n".join(parts)


FORCED = ("This is your final turn: only <final_formula> will be accepted. Submit your best law "
          "now.")
