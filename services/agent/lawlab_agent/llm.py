"""An OpenAI-compatible chat-completions backend (OpenAI, vLLM, llama.cpp, Ollama, ...).

Configuration (environment of the agent service, read once into
lawlab.rpc.settings.LLMEndpoint; a campaign's decoding settings override the
defaults, docs/agents.md):
  LAWLAB_LLM_BASE_URL      e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1
  LAWLAB_LLM_API_KEY       the key (falls back to OPENAI_API_KEY); may be empty for local servers
  LAWLAB_LLM_API_KEY_FILE  or a file holding it (a mounted Kubernetes Secret)
  LAWLAB_LLM_TIMEOUT       seconds per call (default 600: long reasoning replies)
  LAWLAB_LLM_RETRIES       calls per turn before the failure goes into the conversation (default 4)
  LAWLAB_LLM_DEAD_TURNS    turns in a row without any reply that fail the attempt (default 3)
  LAWLAB_LLM_BACKOFF       first backoff in seconds, doubled per retry, at most 60 (default 2)

Loop rules (paper B.2): a failed model call (a timeout, a rate limit, a 5xx, a
malformed body) is retried with exponential backoff inside the turn, honouring
Retry-After; if every retry fails, the failure becomes a message in the
conversation and the turn is spent. A passing fault costs turns, not the trial;
an endpoint that gives no reply for LAWLAB_LLM_DEAD_TURNS turns in a row fails
the attempt (AttemptFailed with the cause: the campaign's retry policy decides),
so a dead endpoint does not silently burn every turn. A refusal no retry can fix
(401, 403, 404: a wrong key or model name) stops the campaign
(ConfigurationError), and admission probes the endpoint before a trial is
stored (``probe``). Reasoning text returned by the endpoint is logged in the
trajectory, never sent back.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Histogram

from lawlab import chat
from lawlab.rpc.settings import LLMEndpoint
from lawlab.vocab import Cause
from lawlab_agent.policy import AttemptFailed, ConfigurationError, TrialContext

log = logging.getLogger("lawlab.agent.llm")

LLM_SECONDS = Histogram("lawlab_llm_request_seconds", "LLM request latency.", ["model"],
                        buckets=(0.1, 0.5, 1, 2, 5, 10, 30, 60, 120))
LLM_TOKENS = Counter("lawlab_llm_tokens_total", "LLM tokens used.", ["model", "kind"])
LLM_ERRORS = Counter("lawlab_llm_errors_total", "Failed LLM requests, by cause.", ["model", "cause"])


LLMConfigError = ConfigurationError  # the name older callers import
PROBE_TIMEOUT = 5.0  # seconds for admission's look at the endpoint


def _reason(reason: object) -> str:
    """A transport failure in words: refused, unknown host, TLS, timeout."""
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(reason, socket.gaierror):
        return f"unknown host ({reason.strerror})"
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"TLS certificate not trusted ({reason.verify_message})"
    if isinstance(reason, ssl.SSLError):
        return f"TLS failed ({reason.reason or reason})"
    if isinstance(reason, TimeoutError):
        return "timed out"
    return f"{type(reason).__name__}: {reason}"


class OpenAIChatPolicy:
    name = "openai"

    def __init__(self, model: str, decoding: Mapping[str, Any] | None = None,
                 endpoint: LLMEndpoint | None = None) -> None:
        self.endpoint = endpoint or LLMEndpoint()
        self.base_url = self.endpoint.base_url
        if not self.base_url:
            raise LLMConfigError("LAWLAB_LLM_BASE_URL is not set in the agent service's "
                                 "environment (the process that runs trials, not this shell): "
                                 "set it where the agent starts (`LAWLAB_LLM_BASE_URL=... "
                                 "lawlab up`, or the lawlab-llm Secret on a cluster) to an "
                                 "OpenAI-compatible endpoint such as http://127.0.0.1:8000/v1")
        if not model:
            raise LLMConfigError("the openai agent needs a model name (--model)")
        self.model = model
        self.key = self.endpoint.api_key
        key_file = self.endpoint.api_key_file
        if not self.key and key_file:
            try:
                self.key = open(key_file, encoding="utf-8").read().strip()
            except OSError as err:
                raise LLMConfigError(f"LAWLAB_LLM_API_KEY_FILE: cannot read {key_file}: "
                                     f"{err.strerror}") from None
        self.retries, self.backoff = self.endpoint.retries, self.endpoint.backoff
        self.decoding = decoding_for(model, decoding)
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self.last_usage: dict[str, int] = {}
        self.last_failures: list[dict] = []
        self.last_reasoning = ""
        self.extra_imports: tuple[str, ...] = ()
        self.dead_turns = 0  # turns in a row in which every call failed
        self.last_call_failed = False
        self.notes: list[str] = []

    async def close(self) -> None:
        return None

    async def probe(self) -> None:
        """Admission's check that the endpoint answers, before a trial is stored:
        GET {base_url}/models (every OpenAI-compatible server has it). Refuses
        (ConfigurationError naming the URL and the cause) a refused connection, an
        unknown host, a TLS failure, a timeout, 401/403 (the key), 404 (the base URL)
        and a model list without the model; a 5xx or a server without the list passes
        (the trial's retries handle a passing fault)."""
        await asyncio.to_thread(self._probe)

    def _probe(self) -> None:
        url = f"{self.base_url.rstrip('/')}/models"
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {self.key}"}
                                     if self.key else {})
        timeout = min(PROBE_TIMEOUT, self.endpoint.timeout)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (configured)
                doc = json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as err:
            if err.code in (401, 403):
                raise LLMConfigError(f"the model endpoint {url} refused the key (HTTP {err.code}):"
                                     " check LAWLAB_LLM_API_KEY (or LAWLAB_LLM_API_KEY_FILE)"
                                     ) from None
            if err.code == 404:
                raise LLMConfigError(f"the model endpoint {url} is not found (HTTP 404): "
                                     "LAWLAB_LLM_BASE_URL must be the API root, usually ending "
                                     "in /v1") from None
            return  # 5xx, 405, 501: reachable; the calls themselves will tell
        except urllib.error.URLError as err:
            raise LLMConfigError(f"the model endpoint {url} cannot be reached: "
                                 f"{_reason(err.reason)}; check LAWLAB_LLM_BASE_URL and that "
                                 "the server is running") from None
        except TimeoutError:
            raise LLMConfigError(f"the model endpoint {url} did not answer within {timeout:g} s; "
                                 "check LAWLAB_LLM_BASE_URL and that the server is running"
                                 ) from None
        except (ConnectionError, http.client.HTTPException, OSError) as err:
            raise LLMConfigError(f"the model endpoint {url} cannot be reached: "
                                 f"{_reason(err)}") from None
        except json.JSONDecodeError:
            return  # not a model list: the calls will tell
        served = [str(m.get("id")) for m in doc.get("data") or [] if isinstance(m, dict)] \
            if isinstance(doc, dict) else []
        if served and self.model not in served:
            raise LLMConfigError(f"the model endpoint {url} does not serve model {self.model!r}; "
                                 f"it serves {', '.join(served[:8])}"
                                 + (f" and {len(served) - 8} more" if len(served) > 8 else ""))

    def _post(self, messages: list[dict]) -> dict:
        doc: dict = {"model": self.model, "messages": messages,
                     "max_completion_tokens": self.decoding["max_completion_tokens"]}
        if self.decoding.get("reasoning_effort"):
            doc["reasoning_effort"] = self.decoding["reasoning_effort"]
        if self.decoding.get("temperature") is not None:
            doc["temperature"] = self.decoding["temperature"]
        return chat.completion(self.base_url, self.key, doc, self.endpoint.timeout)

    async def reply(self, ctx: TrialContext, forced: bool) -> str:
        messages = [{"role": m["role"], "content": m["content"]} for m in ctx.messages]
        last_error, cause = "", ""
        self.last_usage, self.last_reasoning = {}, ""
        self.last_failures = []
        self.last_call_failed = False
        retry_after: float | None = None
        for attempt in range(self.retries):
            if attempt:
                wait = min(60.0, self.backoff * 2 ** (attempt - 1))
                if cause == Cause.RATE_LIMIT and retry_after is not None:
                    wait = min(60.0, max(wait, retry_after))
                await asyncio.sleep(wait)
            content, cause, last_error, retry_after = await self._call_once(messages)
            if content is not None:
                self.dead_turns = 0
                return content
            LLM_ERRORS.labels(self.model, cause).inc()
            self.last_failures.append({"attempt": attempt, "cause": cause, "error": last_error})
            log.warning("llm call failed", extra={"attempt": attempt, "error": last_error})
        self.dead_turns += 1
        self.last_call_failed = True
        if self.dead_turns >= self.endpoint.dead_turns:
            raise AttemptFailed(cause, f"no reply from the model endpoint {self.base_url} in "
                                       f"{self.dead_turns} turns in a row, {self.retries} calls "
                                       f"each (last: {cause}: {last_error})")
        # B.2: the failure stays inside the loop; the turn is spent, the trial goes on
        return (f"[the model call failed {self.retries} times ({cause}: {last_error}); this "
                "turn produced no reply]")

    async def _call_once(self, messages: list[dict[str, str]]
                         ) -> tuple[str | None, str, str, float | None]:
        """One call: (content, '', '', None) on a reply, else (None, cause, error,
        Retry-After seconds if the server sent them); a refused key or model raises."""
        start = time.perf_counter()
        try:
            doc = await asyncio.to_thread(self._post, messages)
        except urllib.error.HTTPError as err:
            if err.code in (401, 403, 404):
                raise LLMConfigError(f"the endpoint refused the request ({err.code}): "
                                     "check LAWLAB_LLM_API_KEY and the model name") from None
            try:
                retry_after = float(err.headers.get("Retry-After", "")) if err.headers else None
            except (TypeError, ValueError):
                retry_after = None
            return (None, "rate_limit" if err.code == 429 else "api_server", f"HTTP {err.code}",
                    retry_after)
        except (json.JSONDecodeError, http.client.HTTPException) as err:
            return None, "api_server", f"malformed response body ({type(err).__name__})", None
        except (TimeoutError, urllib.error.URLError, ConnectionError, OSError) as err:
            return None, "api_timeout", f"{type(err).__name__}: {err}", None
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
            return None, "api_server", "malformed response", None
        self.last_reasoning = str(message.get("reasoning_content")
                                  or message.get("reasoning") or "")
        return content, "", "", None


# ---- decoding per model family (paper B.1) ------------------------------------------

REASONING_PREFIXES = ("o1", "o3", "o4", "gpt-5", "deepseek-r1", "deepseek-reasoner", "qwq",
                      "qwen3", "gemini-2.5", "claude-3-7", "claude-sonnet-4", "claude-opus-4",
                      "grok-3-mini", "grok-4", "magistral", "phi-4-reasoning")
DEFAULTS = {
    # B.1: reasoning models at medium effort with a 65,536-token budget; others at
    # temperature 0.4 with 8,192 tokens (small caps truncate <python> bodies)
    "reasoning": {"max_completion_tokens": 65_536, "reasoning_effort": "medium",
                  "temperature": None},
    "standard": {"max_completion_tokens": 8_192, "reasoning_effort": "", "temperature": 0.4},
}
DECODING_KEYS = ("family", "max_completion_tokens", "reasoning_effort", "temperature")


def family_of(model: str) -> str:
    name = model.lower().rsplit("/", 1)[-1]
    return "reasoning" if name.startswith(REASONING_PREFIXES) else "standard"


def decoding_for(model: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The decoding settings of a trial: the family's defaults (by model name, or the
    ``family`` given), then the campaign's overrides. Refuses unknown keys and bad values
    (ConfigurationError naming the field)."""
    overrides = dict(overrides or {})
    unknown = set(overrides) - set(DECODING_KEYS)
    if unknown:
        raise LLMConfigError(f"decoding: unknown setting(s) {sorted(unknown)}; known: "
                             f"{', '.join(DECODING_KEYS)}")
    family = overrides.pop("family", "") or family_of(model)
    if family not in DEFAULTS:
        raise LLMConfigError(f"decoding.family: {family!r} is not one of {sorted(DEFAULTS)}")
    out: dict[str, Any] = {"family": family, **DEFAULTS[family]}
    for key, value in overrides.items():
        if value is None or value == "":
            continue
        if key == "max_completion_tokens":
            if not isinstance(value, int) or value < 1:
                raise LLMConfigError("decoding.max_completion_tokens: a positive integer")
        if key == "temperature":
            if not isinstance(value, (int, float)) or not 0 <= value <= 2:
                raise LLMConfigError("decoding.temperature: a number from 0 to 2")
            value = float(value)
        if key == "reasoning_effort" and value not in ("minimal", "low", "medium", "high"):
            raise LLMConfigError("decoding.reasoning_effort: minimal, low, medium or high")
        out[key] = value
    return out
