"""Server-sent events of one streamed completion, and the timing rules applied to them.

Pure bookkeeping: the client hands in each buffer read from the socket together with
the perf_counter_ns read once when that buffer arrived. No I/O here, so the rules can be
pinned with a scripted clock (tests/measure/test_client_timing.py).

Rules (as vLLM's benchmark client, see reference/style-anchors.md §5):
- TTFT is taken at the first chunk that carries text (content, reasoning_content or
  reasoning); a role-only chunk is not a token;
- every later text chunk adds one inter-chunk gap; only text chunks move the end time,
  so the trailing finish / usage chunk does not;
- SSE comment lines (':' keep-alives) are skipped;
- a stream without a text chunk is a failure; so is one that ends before a
  finish_reason or [DONE] (the connection dropped mid-response).

Bounds (a hostile or broken server fails its request, never the run or the client):
- the event buffer grows by appending and is searched only in its new bytes, so one
  event costs time linear in its size; an event over MAX_EVENT_BYTES fails the request
  ("oversized");
- past max_tokens + TOKEN_MARGIN tokens (usage, else text chunks) the request fails
  ("overlong"): the server did not honour max_tokens;
- every figure the server sends is checked: completion_tokens an int in 0..MAX_COUNT,
  never falling, never 0 once text came; text fields strings; a chunk not a JSON object,
  or nested too deep for the parser, is "malformed".
"""

import json

from decodescope.measure import redact

MAX_EVENT_BYTES = 4 * 1024 * 1024  # one SSE event; a real chunk is well under 64 KiB
TOKEN_MARGIN = 16  # tokens past max_tokens tolerated (a server's last chunk may overshoot)
MAX_COUNT = 10**9  # larger "token counts" are not counts


class StreamAccumulator:
    def __init__(self, api: str, t_start_ns: int, max_tokens: int | None = None):
        self.api = api  # "chat" or "completions": where the text sits in a chunk
        self.max_tokens = max_tokens  # the request's; None: no cap
        self.t_start_ns = t_start_ns
        self.token_times_ns: list[int] = []  # arrival of each text chunk
        self.texts: list[str] = []  # text of each text chunk
        self.chunk_usage: list[int | None] = []  # cumulative completion_tokens on a text chunk, if sent
        self.usage_tokens: int | None = None  # last usage.completion_tokens seen anywhere
        self.chunk_logprobs: list[int | None] = []  # logprobs entries (one per token) on a text chunk
        self.timings: dict | None = None  # llama.cpp's own counts and times, on its last chunk
        self.finish_reason: str | None = None
        self.response_id: str | None = None
        self.done = False  # saw data: [DONE]
        self.error_kind: str | None = None
        self.error: str | None = None
        self._buf = bytearray()  # the event being received
        self._cr = False  # the last read ended in \r: its \n may come with the next
        self._last_feed_ns = t_start_ns

    def fail(self, kind: str, message: str) -> None:
        if self.error_kind is None:  # the first failure is the reason
            self.error_kind, self.error = kind, redact.text(message)

    def feed(self, data: bytes, t_ns: int) -> None:
        """Take one socket read; every event completed by it arrived at t_ns."""
        if self.error_kind is not None:
            return  # the request has failed: the rest of the stream is not read
        self._last_feed_ns = t_ns
        if self._cr:
            data = b"\r" + data
        self._cr = data.endswith(b"\r")
        if self._cr:
            data = data[:-1]
        if b"\r" in data:
            data = data.replace(b"\r\n", b"\n")
        buf = self._buf
        start = max(0, len(buf) - 1)  # a blank line may straddle the two reads
        buf += data
        done = 0
        while self.error_kind is None:
            end = buf.find(b"\n\n", start)
            if end < 0:
                break
            self._event(bytes(buf[done:end]), t_ns)
            done = start = end + 2
        del buf[:done]
        if len(buf) > MAX_EVENT_BYTES:
            self.fail("oversized", f"an SSE event over {MAX_EVENT_BYTES // 2**20} MiB (a chunk is a few hundred bytes)")

    def finish(self) -> None:
        """The stream ended (EOF, [DONE] or an error): decide whether it succeeded."""
        if self._buf.strip() and self.error_kind is None:
            self._event(bytes(self._buf).strip(b"\n"), self._last_feed_ns)  # last event lacked its blank line
        self._buf = bytearray()
        if self.error_kind is not None:
            return
        if not self.token_times_ns:
            self.fail("no_tokens", "the stream carried no text chunk, so there is no TTFT")
        elif not self.done and self.finish_reason is None:
            self.fail("dropped", "the stream ended before a finish_reason or [DONE] (dropped mid-response)")

    def _event(self, raw: bytes, t_ns: int) -> None:
        data = []
        for line in raw.split(b"\n"):
            if not line or line.startswith(b":"):
                continue  # blank, or an SSE comment / keep-alive
            field, _, value = line.partition(b":")
            if field == b"data":
                data.append(value[1:] if value.startswith(b" ") else value)
        if not data:
            return  # event:, id:, retry: lines alone carry nothing we time
        payload = b"\n".join(data)
        if payload.strip() == b"[DONE]":
            self.done = True
            return
        try:
            chunk = json.loads(payload)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than the parser goes
            chunk = None
        if not isinstance(chunk, dict):
            self.fail("malformed", f"malformed SSE chunk (not a JSON object): {payload[:200]!r}")
            return
        self._chunk(chunk, t_ns)

    def _chunk(self, chunk: dict, t_ns: int) -> None:
        if chunk.get("error"):
            self.fail("server_error", f"error event in the stream: {json.dumps(chunk['error'])[:500]}")
            return
        if self.response_id is None and isinstance(chunk.get("id"), str):
            self.response_id = chunk["id"]
        usage = self._usage(chunk.get("usage"))
        if isinstance(chunk.get("timings"), dict):
            self.timings = chunk["timings"]
        choices = chunk.get("choices")
        if self.error_kind or not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            return  # e.g. the trailing usage chunk: no token, does not move the end time
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = str(choice["finish_reason"])[:100]
        text = _text(choice, self.api)
        if not isinstance(text, str):
            self.fail("malformed", text[1])
            return
        if text:
            self.token_times_ns.append(t_ns)
            self.texts.append(text)
            self.chunk_usage.append(usage)
            self.chunk_logprobs.append(_logprob_count(choice.get("logprobs")))
            self._check_length()

    def _usage(self, usage) -> int | None:
        """usage.completion_tokens when the chunk has it; a value that is no count fails the request."""
        if not isinstance(usage, dict) or usage.get("completion_tokens") is None:
            return None
        n = usage["completion_tokens"]
        if type(n) is not int or not 0 <= n <= MAX_COUNT:
            self.fail("malformed", f"usage.completion_tokens is not a token count: {json.dumps(n)[:40]}")
        elif self.usage_tokens is not None and n < self.usage_tokens:
            self.fail("malformed", f"cumulative usage.completion_tokens went down, {self.usage_tokens} -> {n}")
        elif n == 0 and self.texts:
            self.fail("malformed", f"usage.completion_tokens is 0 after {len(self.texts)} text chunks")
        else:
            self.usage_tokens = n
            self._check_length()
            return n
        return None

    def _check_length(self) -> None:
        if self.max_tokens is None:
            return
        tokens = max(len(self.texts), self.usage_tokens or 0)
        if tokens > self.max_tokens + TOKEN_MARGIN:
            self.fail("overlong", f"{tokens} tokens streamed for max_tokens {self.max_tokens}: stopped reading")


_JSON_TYPES = {int: "number", float: "number", bool: "boolean", list: "array", dict: "object"}


def _text(choice: dict, api: str):
    """The chunk's text, or (None, why) when a text field is not a string."""
    if api == "completions":
        parts = [("text", choice.get("text"))]
    else:
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return ""
        # reasoning models stream their thinking in a separate field; those are tokens too.
        # Some servers mirror one text in both reasoning fields, so take only one of them.
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        parts = [("delta.content", delta.get("content")), ("delta.reasoning_content", reasoning)]
    for name, value in parts:
        if value is not None and not isinstance(value, str):
            return None, f"{name} is a JSON {_JSON_TYPES.get(type(value), 'value')}, not a string"
    return "".join(v for _, v in parts if v)


def _logprob_count(logprobs) -> int | None:
    # chat: {"content": [one entry per token]}; completions: {"tokens": [...], ...}
    if not isinstance(logprobs, dict):
        return None
    entries = logprobs.get("content", logprobs.get("tokens"))
    return len(entries) if isinstance(entries, list) else None
