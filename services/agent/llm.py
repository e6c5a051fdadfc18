"""An OpenAI-compatible chat-completions backend (OpenAI, vLLM, llama.cpp, Ollama, ...).

Configuration (environment of the agent service):
  LAWLAB_LLM_BASE_URL      e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1
  LAWLAB_LLM_API_KEY       the key (falls back to OPENAI_API_KEY); may be empty for local servers
  LAWLAB_LLM_API_KEY_FILE  or a file holding it (a mounted Kubernetes Secret)
  LAWLAB_LLM_MAX_TOKENS    max completion tokens (default 4096)
  LAWLAB_LLM_REASONING_EFFORT  sent as reasoning_effort when set (low, medium, high)
  LAWLAB_LLM_TEMPERATURE   sent only when set (some endpoints reject it)
  LAWLAB_LLM_TIMEOUT       seconds per call (default 120)
  LAWLAB_LLM_FAILED_TURNS  consecutive failed turns before the attempt is abandoned (default 3)
The model name comes from the trial request. Each call has a 120 s timeout and
one retry; a failure becomes an error message inside the loop, not an aborted
trial (PROTOCOL.md section 2). Only when several turns in a row fail (the
endpoint is down or rate-limiting) is the attempt abandoned with its cause, so
the campaign can retry the trial later instead of burning its turns.
Reasoning text returned by the endpoint is logged in the trajectory, never
sent back.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import os
import time
import urllib.error

from prometheus_client import Counter, Histogram

from lawlab import chat
from lawlab_agent.policy import AttemptFailed, ConfigurationError, TrialContext

log = logging.getLogger("lawlab.agent.llm")

LLM_SECONDS = Histogram("lawlab_llm_request_seconds", "LLM request latency.", ["model"],
                        buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120))
LLM_TOKENS = Counter("lawlab_llm_tokens_total", "LLM tokens used.", ["model", "kind"])
LLM_ERRORS = Counter("lawlab_llm_errors_total", "Failed LLM requests, by cause.", ["model", "cause"])
TIMEOUT = float(os.environ.get("LAWLAB_LLM_TIMEOUT", "120"))  # seconds per call


LLMConfigError = ConfigurationError  # the name older callers import


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
        key_file = os.environ.get("LAWLAB_LLM_API_KEY_FILE")
        if not self.key and key_file:
            try:
                self.key = open(key_file, encoding="utf-8").read().strip()
            except OSError as err:
                raise LLMConfigError(f"LAWLAB_LLM_API_KEY_FILE: cannot read {key_file}: "
                                     f"{err.strerror}") from None
        try:
            self.max_tokens = int(os.environ.get("LAWLAB_LLM_MAX_TOKENS", "4096"))
            self.failed_turns_max = int(os.environ.get("LAWLAB_LLM_FAILED_TURNS", "3"))
            temperature = os.environ.get("LAWLAB_LLM_TEMPERATURE")
            self.temperature = float(temperature) if temperature else None
        except ValueError as err:
            raise LLMConfigError(f"LLM settings: {err}") from None
        self.reasoning_effort = os.environ.get("LAWLAB_LLM_REASONING_EFFORT", "")
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.last_usage: dict[str, int] = {}
        self.last_reasoning = ""
        self._failed_turns = 0

    async def close(self) -> None:
        return None

    def _post(self, messages: list[dict]) -> dict:
        doc: dict = {"model": self.model, "messages": messages,
                     "max_completion_tokens": self.max_tokens}
        if self.reasoning_effort:
            doc["reasoning_effort"] = self.reasoning_effort
        if self.temperature is not None:
            doc["temperature"] = self.temperature
        return chat.completion(self.base_url, self.key, doc, TIMEOUT)

    async def reply(self, ctx: TrialContext, forced: bool) -> str:
        messages = [{"role": m["role"], "content": m["content"]} for m in ctx.messages]
        last_error, cause = "", ""
        self.last_usage, self.last_reasoning = {}, ""
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
                if err.code == 429 and attempt == 0:  # honour Retry-After, within reason
                    try:
                        wait = float(err.headers.get("Retry-After", "1"))
                    except (TypeError, ValueError):
                        wait = 1.0
                    await asyncio.sleep(min(max(wait, 0.0), 10.0))
            except (json.JSONDecodeError, http.client.HTTPException) as err:
                cause, last_error = "api_server", f"malformed response body ({type(err).__name__})"
            except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as err:
                cause, last_error = "api_timeout", f"{type(err).__name__}: {err}"
            else:
                LLM_SECONDS.labels(self.model).observe(time.perf_counter() - start)
                usage = doc.get("usage") or {}
                for kind in ("prompt_tokens", "completion_tokens"):
                    n = int(usage.get(kind, 0) or 0)
                    self.usage[kind] += n
                    self.last_usage[kind] = n
                    LLM_TOKENS.labels(self.model, kind).inc(n)
                try:
                    message = doc["choices"][0]["message"]
                    content = str(message.get("content") or "")
                except (KeyError, IndexError, TypeError, AttributeError):
                    cause, last_error = "api_server", "malformed response"
                else:
                    self.last_reasoning = str(message.get("reasoning_content")
                                              or message.get("reasoning") or "")
                    self._failed_turns = 0
                    return content
            LLM_ERRORS.labels(self.model, cause).inc()
            log.warning("llm call failed", extra={"attempt": attempt, "error": last_error})
        self._failed_turns += 1
        if self._failed_turns >= self.failed_turns_max:
            raise AttemptFailed(cause, f"{self._failed_turns} turns in a row failed; last: "
                                       f"{last_error}")
        # the failure is a turn without a tool block, not an aborted trial
        return f"[LLM call failed after one retry: {last_error}]"
