"""HTTP errors of the scripted server, with OpenAI-shaped bodies."""

from __future__ import annotations

from typing import Any

__all__ = ["RequestRejected", "error_body"]

_DEFAULT_TYPE = {400: "invalid_request_error", 401: "invalid_request_error",
                 403: "invalid_request_error", 404: "invalid_request_error",
                 429: "requests"}
_DEFAULT_CODE = {401: "invalid_api_key", 429: "rate_limit_exceeded"}


class RequestRejected(Exception):
    """A request the server answers with an HTTP error.

    Attributes
    ----------
    status : int
        HTTP status code.
    body : dict
        OpenAI-shaped body ``{"error": {"message", "type", "param", "code"}}`` (or the
        shape of the server the scripted server plays).
    headers : dict
        Extra response headers.
    """

    def __init__(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None):
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        inner = body.get("error", body)  # vLLM answers {"object": "error", "message": ...}
        super().__init__(f"{status}: {inner.get('message') if isinstance(inner, dict) else inner}")


def error_body(
    status: int,
    message: str,
    *,
    type: str | None = None,
    param: str | None = None,
    code: str | None = None,
) -> dict[str, Any]:
    """Build an OpenAI-shaped error body; ``type`` defaults by status."""
    if type is None:
        fallback = "server_error" if status >= 500 else "invalid_request_error"
        type = _DEFAULT_TYPE.get(status, fallback)
    if code is None:
        code = _DEFAULT_CODE.get(status)
    return {"error": {"message": message, "type": type, "param": param, "code": code}}
