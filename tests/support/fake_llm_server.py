"""A tiny OpenAI-compatible chat-completions server for tests (stdlib ``http.server`` in a thread).

Tests queue scripted replies; each ``POST /v1/chat/completions`` pops the next one.  A reply is a
dict: ``{"content": str}`` for a normal answer, ``{"delay": seconds, "content": ...}`` for a slow one
(to exercise client timeouts), ``{"status": 500}`` for a server error.  Every request body is
recorded in ``server.requests`` so tests can check what the client actually sent (e.g. that a parse
error was shown to the model on the retry).  When the script runs out the server answers 500, so a
test notices an unexpected extra call instead of hanging.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeLLMServer:
    def __init__(self) -> None:
        self.replies: list[dict[str, Any]] = []
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep pytest output clean
                return

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    reply = (
                        server.replies.pop(0) if server.replies else {"status": 500, "content": "no script"}
                    )
                if reply.get("delay"):
                    time.sleep(float(reply["delay"]))
                status = int(reply.get("status", 200))
                if status != 200:
                    payload = {"error": {"message": reply.get("content", "error"), "type": "server_error"}}
                else:
                    content = reply["content"]
                    prompt_tokens = sum(
                        len(str(m.get("content", "")).split()) for m in body.get("messages", [])
                    )
                    completion_tokens = len(content.split())
                    payload = {
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                        },
                    }
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def script(self, *replies: dict[str, Any] | str) -> None:
        for reply in replies:
            self.replies.append({"content": reply} if isinstance(reply, str) else reply)

    def start(self) -> FakeLLMServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
