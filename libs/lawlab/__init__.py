"""lawlab: a platform to test whether AI agents can discover scientific laws.

This package is the core the services stand on, grouped by concept: ``law`` (the
law language and the submission contract), ``fitting``, ``judging`` (metrics and
S_N, the gate, validity, structure, the one grading path), ``worlds`` (the hidden
laws' model, key and catalogue), ``tasks`` (the task model, library and
specifications), ``results`` (rows, aggregates, exports), ``rpc`` (servers,
clients, settings, errors, conversions, logs) and ``vocab``. The operator's
programs live apart, in ``lawlab_ops``, which no service imports. The generated
gRPC stubs live in the subpackages ``lawlab.<service>.v1`` (built by ``make
proto``).
"""

import os

__version__ = "0.1.0"

# Every lawlab process that holds gRPC channels or a server also starts children
# (services, worker processes, sandbox boxes, judge comparisons, the CLI's view). With
# gRPC's fork support on (its default), the child restarts gRPC's poller between fork
# and exec, and that poller aborts on a closed descriptor: measured here, 38 of 300
# children of a process with a busy channel died with SIGABRT before exec
# (grpc/grpc#43055, open for grpcio 1.80 to 1.85). No lawlab child uses gRPC across a
# fork (each execs a fresh interpreter or computes without it), so fork support is off
# unless the environment says otherwise; set before anything imports grpc.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
