"""Tasks: the one solver-facing task model and the built library (``library``), and
the task specifications (``specs``, YAML in ``task_specs/``)."""
