"""Domain errors that map one-to-one onto gRPC status codes.

Pure code raises these; the server's error interceptor turns them into the
matching status, so handlers never juggle ``context.abort`` themselves.
"""

from __future__ import annotations

import grpc

MAX_MESSAGE = 600  # characters of an error message sent or logged (an echoed 100 kB id is not)
MAX_SHOWN = 80     # characters of a caller's identifier quoted in a message


def shown(value: object, limit: int = MAX_SHOWN) -> str:
    """A caller-supplied identifier as a message quotes it: repr, cut to ``limit``."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(str(value)):,} characters)"


def capped(message: str, limit: int = MAX_MESSAGE) -> str:
    return message if len(message) <= limit else \
        f"{message[:limit]}... ({len(message):,} characters in all)"


class LawlabError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.INTERNAL
    trailing_metadata: tuple[tuple[str, str], ...] = ()

    def __init__(self, message: str) -> None:
        message = capped(message)
        super().__init__(message)
        self.message = message


class InvalidArgument(LawlabError):
    """Bad input; the message names the offending field."""

    code = grpc.StatusCode.INVALID_ARGUMENT

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class NotFound(LawlabError):
    code = grpc.StatusCode.NOT_FOUND


class FailedPrecondition(LawlabError):
    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhausted(LawlabError):
    """Over a budget or a quota. ``retry_after_ms`` (when retrying can help) is
    sent as the trailing metadata ``retry-after-ms``."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED

    def __init__(self, message: str, retry_after_ms: int | None = None) -> None:
        super().__init__(message)
        if retry_after_ms is not None:
            self.trailing_metadata = (("retry-after-ms", str(retry_after_ms)),)


class PermissionDenied(LawlabError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(LawlabError):
    code = grpc.StatusCode.UNAUTHENTICATED


class Unavailable(LawlabError):
    code = grpc.StatusCode.UNAVAILABLE


class AlreadyExists(LawlabError):
    code = grpc.StatusCode.ALREADY_EXISTS


class Aborted(LawlabError):
    """The work was stopped for a reason that is not the caller's input (a
    wall-clock safety net on a busy machine): no verdict, try again."""

    code = grpc.StatusCode.ABORTED
