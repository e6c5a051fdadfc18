"""lawlab_ops: the operator's programs, beside the core they stand on.

The ``lawlab`` command (``lawlab_ops.cli``), the task-library builder
(``lawlab_ops.taskbuild``), campaign reports and the paper's figures, the local
launcher of the five services and the external teams' simulator client. No service
imports this package (tests/unit/test_layers.py); what the services and these
programs share is the core, ``lawlab``.
"""
