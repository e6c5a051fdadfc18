"""An OpenAI-compatible chat-completions backend (OpenAI, vLLM, llama.cpp, Ollama, ...).

Configuration (environment of the agent service):
  LAWLAB_LLM_BASE_URL   e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1
  LAWLAB_LLM_API_KEY    the key (falls back to OPENAI_API_KEY); may be empty for local servers
  LAWLAB_LLM_MAX_TOKENS max completion tokens (default 4096)
The model name comes from the trial request. Each call has a 120 s timeout and
one retry; a failure becomes an error message inside the loop, not an aborted
trial (PROTOCOL.md section 2).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import urllib.error
import urllib.request

from prometheus_client import Counter, Histogram

from lawlab_agent.policy import TrialContext

log = logging.getLogger("lawlab.agent.llm")

LLM_SECONDS = Histogram("lawlab_llm_request_seconds", "LLM request latency.", ["model"],
                        buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120))
LLM_TOKENS = Counter("lawlab_llm_tokens_total", "LLM tokens used.", ["model", "kind"])
LLM_ERRORS = Counter("lawlab_llm_errors_total", "Failed LLM requests, by cause.", ["model", "cause"])
TIMEOUT = 120.0


class LLMConfigError(RuntimeError):
    """A configuration problem (no endpoint, bad key): retrying will not help."""


class OpenAIChatPolicy:
    name = "openai"

    def __init__(self, model: str) -> None:
        self.base_url = os.environ.get("LAWLAB_LLM_BASE_URL", "").rstrip("/")
        if not self.base_url:
            raise LLMConfigError("LAWLAB_LLM_BASE_URL is not set; point it at an "
                                 "OpenAI-compatible endpoint such as http://127.0.0.1:8000/v1")
        if not model:
            raise LLMConfigError("the openai agent needs a model name (--model)")
        self.model = model
        self.key = os.environ.get("LAWLAB_LLM_API_KEY") or os.environ.get("OPENAI_API_KEY", "")
        self.max_tokens = int(os.environ.get("LAWLAB_LLM_MAX_TOKENS", "4096"))
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}

    async def close(self) -> None:
        return None

    def _post(self, messages: list[dict]) -> dict:
        body = json.dumps({"model": self.model, "messages": messages,
                           "max_completion_tokens": self.max_tokens}).encode()
        req = urllib.request.Request(f"{self.base_url}/chat/completions", data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              **({"Authorization": f"Bearer {self.key}"}
                                                 if self.key else {})})
        with urllib.request.urlopen(req, timeout=TIMEOUT) as resp:  # noqa: S310 (configured URL)
            return json.loads(resp.read())

    async def reply(self, ctx: TrialContext, forced: bool) -> str:
        messages = [{"role": m["role"], "content": m["content"]} for m in ctx.messages]
        last_error = ""
        for attempt in range(2):  # one retry
            start = time.perf_counter()
            try:
                doc = await asyncio.to_thread(self._post, messages)
            except urllib.error.HTTPError as err:
                if err.code in (401, 403, 404):
                    raise LLMConfigError(f"the endpoint refused the request ({err.code}): "
                                         "check LAWLAB_LLM_API_KEY and the model name") from None
                cause = "rate_limit" if err.code == 429 else "api_server"
                last_error = f"HTTP {err.code}"
            except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as err:
                cause, last_error = "api_timeout", f"{type(err).__name__}: {err}"
            else:
                LLM_SECONDS.labels(self.model).observe(time.perf_counter() - start)
                usage = doc.get("usage") or {}
                for kind in ("prompt_tokens", "completion_tokens"):
                    self.usage[kind] += int(usage.get(kind, 0))
                    LLM_TOKENS.labels(self.model, kind).inc(int(usage.get(kind, 0)))
                try:
                    return str(doc["choices"][0]["message"].get("content") or "")
                except (KeyError, IndexError, TypeError):
                    cause, last_error = "malformed", "malformed response"
            LLM_ERRORS.labels(self.model, cause).inc()
            log.warning("llm call failed", extra={"attempt": attempt, "error": last_error})
        # the failure is a turn without a tool block, not an aborted trial
        return f"[LLM call failed after one retry: {last_error}]"
