"""Domain errors that map one-to-one onto gRPC status codes.

Pure code raises these; the server's error interceptor turns them into the
matching status, so handlers never juggle ``context.abort`` themselves.
"""

from __future__ import annotations

import grpc


class LawlabError(Exception):
    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
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
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class PermissionDenied(LawlabError):
    code = grpc.StatusCode.PERMISSION_DENIED


class Unauthenticated(LawlabError):
    code = grpc.StatusCode.UNAUTHENTICATED


class Unavailable(LawlabError):
    code = grpc.StatusCode.UNAVAILABLE
