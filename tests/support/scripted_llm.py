"""A scripted OpenAI-compatible chat-completions server (real HTTP on loopback).

The reply to a request is chosen by how many assistant turns the conversation
already holds; FAIL_ONCE makes chosen turns fail once with an HTTP status.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SUBMISSION = """USED_INPUTS = ["temperature"]
LAW_CONSTANTS = {"A": 8.0, "B": 3100.0, "C": 270.0}
OTHER_CONSTANTS = {}
LOCAL_FITTABLE = {}


def predict(X, A, B, C):
    import numpy as np
    T = np.asarray(X, dtype=float)[:, 0]
    return 10 ** (A - B / (C + T))
"""

# the reply for each turn (by how many assistant messages came before)
SCRIPT: list[str] = [
    "Let me look at the data. <python>print(train_df.describe())",  # unclosed: costs the turn
    "<python>print(train_df.shape)</python>",
    "I am confident. <final_formula>\n" + SUBMISSION + "</final_formula>",
]
FAIL_ONCE = {1: 500}  # turn -> HTTP status served once first (the backend retries once)


class ScriptedLLM:
    """``respond(body) -> reply`` replaces the trial script when given. A reply is
    the content (str), or a failure mode: ``(status, text)`` an HTTP error,
    ``("hang", seconds)`` no answer for that long, ``("truncated", content)``
    a body cut short of its Content-Length, ``("garbage", text)`` a 200 whose
    body is not JSON. ``delay`` seconds are waited before every reply.

    ``GET /v1/models`` lists ``models`` (default: none listed, which admission's
    probe accepts), or answers ``models_status`` (e.g. 401) when that is set.
    """

    def __init__(self, respond=None, models: list[str] | None = None,
                 models_status: int = 0) -> None:
        self.respond = respond
        self.models = list(models or [])
        self.models_status = models_status
        self.probes = 0
        self.requests: list[dict] = []
        self.delay = 0.0
        self._failed: set[int] = set()
        handler = self._handler()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def _handler(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                outer.probes += 1
                if self.path.rstrip("/") != "/v1/models" or outer.models_status:
                    self.send_response(outer.models_status or 404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                data = json.dumps({"object": "list", "data": [
                    {"id": m, "object": "model"} for m in outer.models]}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
                if outer.respond is None and turn in FAIL_ONCE and turn not in outer._failed:
                    outer._failed.add(turn)
                    self.send_response(FAIL_ONCE[turn])
                    self.end_headers()
                    return
                entry = (outer.respond(body) if outer.respond is not None
                         else SCRIPT[min(turn, len(SCRIPT) - 1)])
                if outer.delay:
                    time.sleep(outer.delay)
                truncated = False
                if isinstance(entry, tuple):
                    kind, arg = entry
                    if kind == "hang":
                        time.sleep(float(arg))
                        return
                    if kind == "garbage":
                        data = str(arg).encode()
                        self.send_response(200)
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                        return
                    if kind != "truncated":
                        data = str(arg).encode()
                        self.send_response(int(kind))
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                        return
                    entry, truncated = arg, True
                doc = {"id": "x", "object": "chat.completion", "model": body["model"],
                       "choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": entry}}],
                       "usage": {"prompt_tokens": 100, "completion_tokens": 20}}
                data = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if truncated:  # the connection closes half-way through the body
                    self.wfile.write(data[: len(data) // 2])
                    self.close_connection = True
                    return
                self.wfile.write(data)

        return Handler

    def __enter__(self) -> "ScriptedLLM":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
