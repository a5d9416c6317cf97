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
"""

import json


class StreamAccumulator:
    def __init__(self, api: str, t_start_ns: int):
        self.api = api  # "chat" or "completions": where the text sits in a chunk
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
        self._buf = b""
        self._last_feed_ns = t_start_ns

    def fail(self, kind: str, message: str) -> None:
        if self.error_kind is None:  # the first failure is the reason
            self.error_kind, self.error = kind, message

    def feed(self, data: bytes, t_ns: int) -> None:
        """Take one socket read; every event completed by it arrived at t_ns."""
        if self.error_kind is not None:
            return  # the request has failed: the rest of the stream is not read
        self._last_feed_ns = t_ns
        buf = self._buf + data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        while self.error_kind is None:
            end = buf.find(b"\n\n")
            if end < 0:
                break
            self._event(buf[:end], t_ns)
            buf = buf[end + 2 :]
        self._buf = buf

    def finish(self) -> None:
        """The stream ended (EOF, [DONE] or an error): decide whether it succeeded."""
        if self._buf.strip() and self.error_kind is None:
            self._event(self._buf.strip(b"\n"), self._last_feed_ns)  # last event lacked its blank line
        self._buf = b""
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
        except ValueError:
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
        usage = _completion_tokens(chunk.get("usage"))
        if usage is not None:
            self.usage_tokens = usage
        if isinstance(chunk.get("timings"), dict):
            self.timings = chunk["timings"]
        choices = chunk.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            return  # e.g. the trailing usage chunk: no token, does not move the end time
        choice = choices[0]
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        text = _text(choice, self.api)
        if text:
            self.token_times_ns.append(t_ns)
            self.texts.append(text)
            self.chunk_usage.append(usage)
            self.chunk_logprobs.append(_logprob_count(choice.get("logprobs")))


def _text(choice: dict, api: str) -> str:
    if api == "completions":
        text = choice.get("text")
        return text if isinstance(text, str) else ""
    delta = choice.get("delta")
    if not isinstance(delta, dict):
        return ""
    # reasoning models stream their thinking in a separate field; those are tokens too.
    # Some servers mirror one text in both reasoning fields, so take only one of them.
    reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""
    return (delta.get("content") or "") + reasoning


def _completion_tokens(usage) -> int | None:
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        return usage["completion_tokens"]
    return None


def _logprob_count(logprobs) -> int | None:
    # chat: {"content": [one entry per token]}; completions: {"tokens": [...], ...}
    if not isinstance(logprobs, dict):
        return None
    entries = logprobs.get("content", logprobs.get("tokens"))
    return len(entries) if isinstance(entries, list) else None
