"""A stdlib fake model endpoint on 127.0.0.1 that answers every turn with a canned final message.

It speaks the two wire protocols the real agent CLIs use (see ``support.agent_cli``):

- the OpenAI **Responses API** (``POST .../responses``), streamed as server-sent events when the
  request says ``"stream": true`` (what ``codex exec`` sends: ``response.created``,
  ``response.in_progress``, ``response.output_item.added``, ``response.content_part.added``,
  ``response.output_text.delta``, ``response.output_text.done``, ``response.content_part.done``,
  ``response.output_item.done``, ``response.completed`` with ``usage``), else one JSON object;
- **chat completions** (``POST .../chat/completions``), streamed as ``chat.completion.chunk``
  events ending in ``data: [DONE]`` (what ``opencode run`` sends), else one JSON object;

and ``GET .../models`` (a one-model list). Anything else is a 404. Every request is recorded
(:attr:`FakeModel.requests`), the body parsed as JSON where it is JSON.

In-process::

    with FakeModel("<findings>[]</findings>") as fake:
        run([... agent_argv(..., port=fake.port) ...])
        assert fake.requests[0].path == "/v1/responses"

As a script, so that it can be started inside another network namespace (a confined agent's:
its loopback is not the test's), writing the port it bound to ``--port-file`` (atomically, once
listening) and each request as one JSON line to ``--requests-file``; it serves until SIGTERM or
SIGINT, or until ``--idle-exit`` seconds pass without a request once one was served::

    python3 fake_model.py --port-file F --answer-file A [--requests-file R] [--port 0]
                          [--netns-of PID] [--lo-up] [--echo-requests]

``--answer-file`` is re-read for every request, so a test can change the answer between turns.
``--echo-requests`` also writes each request on standard error, one line ``fake-model request: JSON``
before it is answered: the log of a fake that runs inside a confinement that keeps none of its files
but relays its standard error (``attest review exec``).

A confined agent has a network namespace of its own. attest brings its loopback up where the host
has ``ip`` (the record's ``"network": "loopback"``): the fake then runs inside the confinement
itself, started by the reviewer (``support.agent_cli.review_script``), and is reached on that
namespace's 127.0.0.1 only. Where the loopback is DOWN, the agent has no capability to bring it up:
there, ``connect(127.0.0.1)`` fails with ENETUNREACH (binding 127.0.0.1 succeeds, ``::1`` fails
with EADDRNOTAVAIL), and ``ip link set lo up`` is refused (EPERM). ``--netns-of PID`` makes this
script join the network namespace of process PID first (and its user namespace, when that is not
ours: a rootless confinement's, which the caller owns), before it opens any socket; ``--lo-up``
then brings that namespace's ``lo`` up (needs CAP_NET_ADMIN over it: root, or the owner of the
rootless confinement's user namespace). The script keeps the caller's mount namespace, so its
port and request files are the caller's paths.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["REQUEST_LINE", "FakeModel", "Seen", "ToolCall", "main", "parse_request_lines"]

MODEL = "fake-model"
#: The prefix of each request line ``--echo-requests`` writes on standard error (a confined fake's log:
#: the confinement keeps none of its files, but relays its standard error).
REQUEST_LINE = "fake-model request: "


@dataclass
class Seen:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""
    json: Any = None
    at: float = field(default_factory=time.time)

    def to_json(self) -> dict[str, Any]:
        return {"method": self.method, "path": self.path, "headers": self.headers,
                "json": self.json, "body": None if self.json is not None else self.body.decode("utf-8", "replace"),
                "at": self.at}


@dataclass(frozen=True)
class ToolCall:
    """A turn that asks the agent to call one of its tools instead of answering (``arguments`` as JSON)."""

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def arguments_json(self) -> str:
        return json.dumps(self.arguments)


def _usage_words(text: str) -> int:
    return max(1, len(text.split()))


def _chunks(text: str, size: int = 48) -> list[str]:
    return [text[i:i + size] for i in range(0, len(text), size)] or [""]


def responses_events(answer: str, *, model: str = MODEL, seq: int = 1) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of one streamed Responses API turn whose only output is ``answer``."""
    rid, mid, now = f"resp_fake_{seq}", f"msg_fake_{seq}", int(time.time())
    usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": _usage_words(answer),
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1 + _usage_words(answer)}
    base = {"id": rid, "object": "response", "created_at": now, "model": model, "output": [],
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}
    part_empty = {"type": "output_text", "text": "", "annotations": []}
    part_full = {"type": "output_text", "text": answer, "annotations": []}
    item_open = {"id": mid, "type": "message", "status": "in_progress", "role": "assistant", "content": []}
    item_done = {"id": mid, "type": "message", "status": "completed", "role": "assistant", "content": [part_full]}
    where = {"item_id": mid, "output_index": 0, "content_index": 0}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": {**base, "status": "in_progress"}}),
        ("response.in_progress", {"response": {**base, "status": "in_progress"}}),
        ("response.output_item.added", {"output_index": 0, "item": item_open}),
        ("response.content_part.added", {**where, "part": part_empty}),
        *(("response.output_text.delta", {**where, "delta": d}) for d in _chunks(answer)),
        ("response.output_text.done", {**where, "text": answer}),
        ("response.content_part.done", {**where, "part": part_full}),
        ("response.output_item.done", {"output_index": 0, "item": item_done}),
        ("response.completed", {"response": {**base, "status": "completed", "output": [item_done], "usage": usage}}),
    ]
    return [(name, {"type": name, "sequence_number": i, **data}) for i, (name, data) in enumerate(events)]


def responses_call_events(call: ToolCall, *, model: str = MODEL, seq: int = 1) -> list[tuple[str, dict[str, Any]]]:
    """The server-sent events of one streamed Responses API turn whose only output is a function call."""
    rid, fid, now = f"resp_fake_{seq}", f"fc_fake_{seq}", int(time.time())
    base = {"id": rid, "object": "response", "created_at": now, "model": model, "output": [],
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": []}
    usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}
    item = {"id": fid, "type": "function_call", "call_id": f"call_fake_{seq}", "name": call.name}
    done = {**item, "arguments": call.arguments_json, "status": "completed"}
    events: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": {**base, "status": "in_progress"}}),
        ("response.in_progress", {"response": {**base, "status": "in_progress"}}),
        ("response.output_item.added", {"output_index": 0, "item": {**item, "arguments": "", "status": "in_progress"}}),
        ("response.function_call_arguments.delta", {"item_id": fid, "output_index": 0, "delta": call.arguments_json}),
        ("response.function_call_arguments.done", {"item_id": fid, "output_index": 0, "arguments": call.arguments_json}),
        ("response.output_item.done", {"output_index": 0, "item": done}),
        ("response.completed", {"response": {**base, "status": "completed", "output": [done], "usage": usage}}),
    ]
    return [(name, {"type": name, "sequence_number": i, **data}) for i, (name, data) in enumerate(events)]


def responses_object(answer: str, *, model: str = MODEL, seq: int = 1) -> dict[str, Any]:
    """The final object of one non-streamed Responses API turn."""
    final: dict[str, Any] = responses_events(answer, model=model, seq=seq)[-1][1]["response"]
    return final


def chat_chunks(answer: str, *, model: str = MODEL, seq: int = 1) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of one streamed chat completion whose content is ``answer``."""
    cid, now = f"chatcmpl-fake-{seq}", int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra}

    usage = {"prompt_tokens": 1, "completion_tokens": _usage_words(answer), "total_tokens": 1 + _usage_words(answer)}
    return [chunk({"role": "assistant", "content": ""}), *(chunk({"content": d}) for d in _chunks(answer)),
            chunk({}, "stop"), {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model,
                                "choices": [], "usage": usage}]


def chat_call_chunks(call: ToolCall, *, model: str = MODEL, seq: int = 1) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` objects of one streamed chat completion that calls one tool."""
    cid, now = f"chatcmpl-fake-{seq}", int(time.time())
    tool = {"index": 0, "id": f"call_fake_{seq}", "type": "function", "function": {"name": call.name, "arguments": call.arguments_json}}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    return [chunk({"role": "assistant", "content": None, "tool_calls": [tool]}), chunk({}, "tool_calls")]


def chat_object(answer: str, *, model: str = MODEL, seq: int = 1) -> dict[str, Any]:
    """One non-streamed chat completion whose content is ``answer``."""
    return {"id": f"chatcmpl-fake-{seq}", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": _usage_words(answer), "total_tokens": 1 + _usage_words(answer)}}


Turn = str | ToolCall
Answer = Turn | Sequence[Turn] | Callable[[Seen], Turn]


class FakeModel:
    """The fake endpoint: ``start()`` binds ``host:port`` (0: any free port) and serves in a thread.

    ``answer``: the final text of every turn; a list of turns (the n-th model request gets the
    n-th, the last repeats), each a text or a :class:`ToolCall`; or a function of the request
    returning a turn.
    ``status``: answer every model request with this HTTP status instead (500: a failing provider).
    ``on_request``: called with each :class:`Seen` as it arrives (the script's request log).
    """

    def __init__(self, answer: Answer, *, host: str = "127.0.0.1", port: int = 0, model: str = MODEL,
                 status: int = 200, on_request: Callable[[Seen], None] | None = None) -> None:
        self.answer, self.host, self.model, self.status = answer, host, model, status
        self._want_port, self._on_request = port, on_request
        self.requests: list[Seen] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeModel:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:
                fake._handle(self, b"")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fake._handle(self, body)

        server = ThreadingHTTPServer((self.host, self._want_port), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="fake-model", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None

    def __enter__(self) -> FakeModel:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the fake model is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def model_requests(self) -> list[Seen]:
        """The requests that asked for a turn (Responses or chat completions), in order."""
        with self._lock:
            return [r for r in self.requests if r.method == "POST" and r.path.rstrip("/").endswith(("/responses", "/chat/completions"))]

    # -- serving -----------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, body: bytes) -> None:
        try:
            doc = json.loads(body) if body else None
        except ValueError:
            doc = None
        seen = Seen(h.command, h.path, {k.lower(): v for k, v in h.headers.items()}, body, doc)
        with self._lock:
            self.requests.append(seen)
            seq = len(self.requests)
        if self._on_request is not None:
            self._on_request(seen)
        path = h.path.split("?", 1)[0].rstrip("/")
        if h.command == "GET" and path.endswith("/models"):
            return self._json(h, 200, {"object": "list", "data": [{"id": self.model, "object": "model", "created": 0,
                                                                     "owned_by": "fake"}], "models": []})
        kind = "responses" if path.endswith("/responses") else "chat" if path.endswith("/chat/completions") else None
        if h.command != "POST" or kind is None:
            return self._json(h, 404, {"error": {"message": f"no such endpoint: {h.command} {h.path}", "type": "not_found"}})
        if self.status != 200:
            return self._json(h, self.status, {"error": {"message": "the fake model fails on purpose", "type": "server_error"}})
        turn = self._turn(seen)
        stream = isinstance(doc, dict) and bool(doc.get("stream"))
        if isinstance(turn, ToolCall):
            if kind == "responses":
                events = responses_call_events(turn, model=self.model, seq=seq)
                if not stream:
                    return self._json(h, 200, events[-1][1]["response"])
                frames = [f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events]
            else:
                chunks = chat_call_chunks(turn, model=self.model, seq=seq)
                if not stream:
                    tool = chunks[0]["choices"][0]["delta"]["tool_calls"][0]
                    return self._json(h, 200, {**chat_object("", model=self.model, seq=seq), "choices": [{"index": 0, "finish_reason": "tool_calls",
                                      "message": {"role": "assistant", "content": None, "tool_calls": [{k: v for k, v in tool.items() if k != "index"}]}}]})
                frames = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
        elif not stream:
            obj = responses_object(turn, model=self.model, seq=seq) if kind == "responses" else \
                chat_object(turn, model=self.model, seq=seq)
            return self._json(h, 200, obj)
        elif kind == "responses":
            frames = [f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in responses_events(turn, model=self.model, seq=seq)]
        else:
            frames = [f"data: {json.dumps(c)}\n\n" for c in chat_chunks(turn, model=self.model, seq=seq)] + ["data: [DONE]\n\n"]
        payload = "".join(frames).encode()
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)
        h.wfile.flush()

    def _turn(self, seen: Seen) -> Turn:
        if callable(self.answer):
            return self.answer(seen)
        if isinstance(self.answer, (str, ToolCall)):
            return self.answer
        turns = list(self.answer)
        n = len(self.model_requests()) - 1
        return turns[min(n, len(turns) - 1)]

    @staticmethod
    def _json(h: BaseHTTPRequestHandler, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()


CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS, _SIOCSIFFLAGS, _IFF_UP = 0x8913, 0x8914, 0x1


def join_netns_of(pid: int) -> None:
    """Join the network namespace of ``pid`` (and first its user namespace, when it is not ours).

    Must run before this process opens any socket and while it has one thread (joining a user
    namespace requires that).

    Raises:
        OSError: the namespace cannot be opened or joined (no permission, no such process).
    """
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def setns(path: str, kind: int) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if libc.setns(fd, kind) != 0:
                e = ctypes.get_errno()
                raise OSError(e, f"setns({path}): {os.strerror(e)}")
        finally:
            os.close(fd)

    if os.readlink(f"/proc/{pid}/ns/user") != os.readlink("/proc/self/ns/user"):
        setns(f"/proc/{pid}/ns/user", CLONE_NEWUSER)
    setns(f"/proc/{pid}/ns/net", CLONE_NEWNET)


def loopback_up(name: str = "lo") -> bool:
    """Bring interface ``name`` of this process's network namespace up; whether it was down.

    Raises:
        OSError: EPERM without CAP_NET_ADMIN over the namespace.
    """
    import fcntl
    import socket
    import struct

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH22x", name.encode(), 0)
        flags = struct.unpack("16sH22x", fcntl.ioctl(s, _SIOCGIFFLAGS, req))[1]
        if flags & _IFF_UP:
            return False
        fcntl.ioctl(s, _SIOCSIFFLAGS, struct.pack("16sH22x", name.encode(), flags | _IFF_UP))
        return True


def parse_request_lines(text: str) -> list[dict[str, Any]]:
    """The requests ``--echo-requests`` wrote into ``text`` (a captured standard error), in order."""
    return [json.loads(line[len(REQUEST_LINE):]) for line in text.splitlines() if line.startswith(REQUEST_LINE)]


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    """The script: serve ``--answer-file``'s text until SIGTERM/SIGINT (or ``--idle-exit``)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--answer-file", required=True, help="the canned final text (re-read for every turn)")
    p.add_argument("--port-file", required=True, help="where to write the bound port once listening")
    p.add_argument("--requests-file", help="append each request here as one JSON line")
    p.add_argument("--echo-requests", action="store_true",
                   help=f"also write each request on standard error, one line {REQUEST_LINE!r} + JSON, before answering it")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--status", type=int, default=200, help="answer model requests with this HTTP status")
    p.add_argument("--idle-exit", type=float, default=0.0, help="exit after this many idle seconds once a turn was served")
    p.add_argument("--netns-of", type=int, metavar="PID", help="serve in the network namespace of process PID")
    p.add_argument("--lo-up", action="store_true", help="bring lo up first (a fresh network namespace has it down)")
    args = p.parse_args(argv)
    if args.netns_of is not None:
        join_netns_of(args.netns_of)
    if args.lo_up:
        loopback_up()

    def answer(_: Seen) -> str:
        with open(args.answer_file, encoding="utf-8") as f:
            return f.read()

    log_lock = threading.Lock()

    def log(seen: Seen) -> None:
        line = json.dumps(seen.to_json())
        with log_lock:
            if args.requests_file:
                with open(args.requests_file, "a", encoding="utf-8") as f:
                    f.write(line + "\n")
            if args.echo_requests:
                sys.stderr.write(REQUEST_LINE + line + "\n")
                sys.stderr.flush()

    fake = FakeModel(answer, host=args.host, port=args.port, status=args.status, on_request=log).start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    _write_atomic(args.port_file, f"{fake.port}\n")
    try:
        while not stop.wait(0.2):
            if args.idle_exit and fake.requests and time.time() - fake.requests[-1].at > args.idle_exit:
                break
    finally:
        fake.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
