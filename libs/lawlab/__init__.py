"""lawlab: a platform to test whether AI agents can discover scientific laws.

This package is the shared core used by every service: the task model and
loader, the submission contract, metric functions, the safe law-expression
evaluator, fitting, gRPC plumbing and the operator command line. The generated
gRPC stubs live in the subpackages ``lawlab.<service>.v1`` (built by
``make proto``).
"""

__version__ = "0.1.0"
