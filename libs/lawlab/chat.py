"""One OpenAI-compatible chat-completions call over HTTP (stdlib only), shared by
the agent's LLM backend, the LLM judge, the memorization audit and the
knockout selector. Errors propagate (urllib.error.HTTPError, URLError,
TimeoutError, json.JSONDecodeError, http.client.HTTPException): each caller
has its own retry and classification policy."""

from __future__ import annotations

import json
import urllib.request
from typing import Any


def completion(base_url: str, key: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """POST ``body`` to ``{base_url}/chat/completions``; the decoded response document."""
    req = urllib.request.Request(f"{base_url.rstrip('/')}/chat/completions",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          **({"Authorization": f"Bearer {key}"} if key else {})})
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (configured URL)
        doc: dict[str, Any] = json.loads(resp.read())
        return doc


def content(doc: dict[str, Any]) -> str:
    """The first choice's message text."""
    return str(doc["choices"][0]["message"].get("content") or "")
