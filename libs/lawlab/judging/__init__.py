"""Judging a law: the metrics and S_N (``metrics``), the gate against hacks
(``antihack``, ``jumps``), the validity rubric (``rubric``, ``validity``), the
structure score S_S (``structure``), the one grading path both graders call
(``grading``) and submission run records (``submission_runs``)."""
