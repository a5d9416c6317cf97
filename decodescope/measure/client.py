"""Streaming client for OpenAI-compatible servers: one request in, one RequestResult out.

Timing: every socket read is stamped as it happens and parsed there (arrival.py), so
events that arrived together share a timestamp and no stream's parsing delays the
clock of another. Every failure is caught into the result (error_kind + error), so one
bad request cannot end a run.
"""

import asyncio
import time
from dataclasses import asdict, dataclass, field, fields

import aiohttp
from yarl import URL

from decodescope.errors import DecodescopeError
from decodescope.measure import chunks, redact, redirects
from decodescope.measure.arrival import read_stamped
from decodescope.measure.bounds import Guard, request_deadline_s
from decodescope.measure.stream import StreamAccumulator
from decodescope.measure.suites import Prompt
from decodescope.measure.tokens import count_tokens

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


@dataclass(frozen=True)
class Endpoint:
    base_url: str  # scheme://host:port[/prefix], without /v1
    api: str  # "chat" or "completions"
    model: str
    headers: dict = field(default_factory=dict, repr=False)  # may hold the API key: never saved
    redirects: str = "none"  # follow 307/308: "none", "same-host" or "any"

    @property
    def url(self) -> str:
        return self.base_url + PATHS[self.api]


@dataclass(frozen=True)
class Sampling:
    max_tokens: int  # used when the prompt line sets none
    temperature: float
    timeout_s: float  # connect, and longest silence between two socket reads
    extra_body: dict = field(default_factory=dict)  # server-specific fields, e.g. {"ignore_eos": true}
    request_timeout_s: float | None = None  # whole request; None: from max_tokens (bounds.py)
    logprobs: bool = False  # ask for one logprobs entry per token: exact tokens per chunk


@dataclass(frozen=True)
class Job:
    suite: str
    prompt_index: int
    prompt: Prompt
    warmup: bool = False
    concurrency: int | None = None  # the load level this request ran at
    rate: float | None = None  # requests/s, for open-loop levels


@dataclass(frozen=True)
class RequestResult:
    suite: str
    prompt_index: int
    warmup: bool
    concurrency: int | None
    rate: float | None
    ok: bool
    # connection, http, timeout, dropped, malformed, server_error, no_tokens, cancelled, client,
    # deadline (past --request-timeout), overlong (past max_tokens), oversized (an SSE event too big)
    error_kind: str | None
    error: str | None
    http_status: int | None
    start_s: float  # request sent, s since the run started
    end_s: float  # request over (last byte, error or cancel), s since the run started
    ttft_ms: float | None  # to the first text chunk
    itl_ms: tuple[float, ...]  # every gap between consecutive text chunks
    latency_ms: float | None  # to the last text chunk: latency - ttft == sum(itl)
    output_tokens: int
    token_count_source: str  # "usage", "timings", "logprobs", "tokenizer" or "chunks"
    chunk_tokens: tuple[int, ...] | None  # tokens in each text chunk, None when unknown
    decode_tok_s: float | None  # tokens after the first read / (last text chunk - first read)
    output_chars: int
    finish_reason: str | None
    response_id: str | None
    resent: bool = False  # sent a second time: the pooled connection had been closed by the server
    chunk_source: str | None = None  # where chunk_tokens came from (tokens.py); "even": estimated
    timings_tok_s: float | None = None  # the server's own decode rate of this request (llama.cpp timings)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "RequestResult":
        kw = {f.name: d.get(f.name) for f in fields(cls)}
        kw["itl_ms"] = tuple(kw["itl_ms"] or ())
        if kw["chunk_tokens"] is not None:
            kw["chunk_tokens"] = tuple(kw["chunk_tokens"])
        kw["resent"] = bool(kw["resent"])
        return cls(**kw)


def base_url(url: str) -> str:
    """The server root from whatever the user typed: root, /v1, or a full endpoint URL."""
    u = URL(url.strip())
    if u.scheme not in ("http", "https") or not u.host:
        raise DecodescopeError(f"not an http(s) URL: {url!r}", "pass the server root, e.g. http://localhost:8000")
    path = u.path.rstrip("/")
    for tail in (*PATHS.values(), "/v1/models", "/v1"):
        if path.endswith(tail):
            path = path[: -len(tail)]
            break
    return str(u.with_user(None).with_path(path).with_query(None)).rstrip("/")


def open_session(concurrency: int | None, timeout_s: float) -> aiohttp.ClientSession:
    connector = aiohttp.TCPConnector(limit=concurrency or 0)  # 0: no cap, for open-loop rates
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)
    return aiohttp.ClientSession(connector=connector, timeout=timeout, trace_configs=[redirects.trace_config()])


def payload(endpoint: Endpoint, job: Job, sampling: Sampling) -> dict:
    body = {
        "model": endpoint.model,
        "stream": True,
        # continuous_usage_stats: the running token count on every chunk (vLLM); others ignore it
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "max_tokens": job.prompt.max_tokens or sampling.max_tokens,
        "temperature": sampling.temperature,
    }
    if endpoint.api == "chat":
        body["messages"] = job.prompt.as_messages()
    else:
        body["prompt"] = job.prompt.as_text()
    if sampling.logprobs:  # chat: a flag; completions: how many alternatives (the token itself is always there)
        body["logprobs"] = True if endpoint.api == "chat" else 1
    body.update(sampling.extra_body)
    return body


async def send_request(
    session: aiohttp.ClientSession, endpoint: Endpoint, job: Job, sampling: Sampling, run_t0_ns: int, tokenizer=None
) -> RequestResult:
    body = payload(endpoint, job, sampling)
    clock = time.perf_counter_ns
    for attempt in (1, 2):
        t0 = clock()  # a second attempt starts the timing over
        max_tokens = body.get("max_tokens") if type(body.get("max_tokens")) is int else None
        acc = StreamAccumulator(endpoint.api, t0, max_tokens)
        guard = Guard(acc, request_deadline_s(max_tokens, sampling.timeout_s, sampling.request_timeout_s))
        try:
            status, stale = await _attempt(session, endpoint, body, sampling, acc, clock, guard.feed)
        finally:
            guard.close()
        if not (stale and attempt == 1):
            break
    t_end = clock()
    acc.finish()
    tokens = await _count(acc, tokenizer)
    return build_result(job, acc, tokens, status, run_t0_ns, t_end, resent=attempt == 2)


async def _attempt(session, endpoint: Endpoint, body: dict, sampling: Sampling, acc: StreamAccumulator, clock, feed):
    """One POST, its stream fed to acc (through feed). Returns (HTTP status, stale): stale
    when a pooled connection failed before any answer — the server had closed it after the
    last response (llama-server does, keep-alive header or not) — so sending again is safe."""
    status = None
    ctx = redirects.request_ctx(endpoint.redirects)
    try:
        async with session.post(
            endpoint.url, json=body, headers=endpoint.headers, **redirects.post_kwargs(endpoint.redirects, ctx)
        ) as resp:
            status = resp.status
            if status != 200:
                text = b""  # its start says why; a body may be endless
                while len(text) < 4096 and (piece := await resp.content.read(4096 - len(text))):
                    text += piece
                acc.fail("http", f"HTTP {status}: {redirects.location(resp)}{text.decode(errors='replace')[:500]}")
            else:
                await read_stamped(resp, feed, clock)
    except asyncio.CancelledError:  # Ctrl-C / SIGTERM (the load runner), or the Guard: keep the request
        asyncio.current_task().uncancel()
        acc.fail("cancelled", "interrupted (Ctrl-C or SIGTERM) before the stream finished")
    except TimeoutError:
        acc.fail("timeout", f"no data for {sampling.timeout_s:g} s (server stalled past --timeout)")
    except aiohttp.ClientConnectorError as e:
        acc.fail("connection", f"cannot connect to {endpoint.url}: {e.os_error or e}")
    except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as e:
        when = "mid-response" if status is not None else "before the response"
        acc.fail("dropped", f"connection dropped {when}: {redact.describe(e)}")
        return status, status is None and ctx["reused"]
    except aiohttp.ClientOSError as e:
        acc.fail("client", redact.describe(e))
        return status, status is None and ctx["reused"]
    except aiohttp.ClientError as e:
        acc.fail("client", redact.describe(e))
    return status, False


async def _count(acc: StreamAccumulator, tokenizer):
    predicted = (acc.timings or {}).get("predicted_n")
    predicted = predicted if isinstance(predicted, int) else None
    args = (acc.texts, acc.usage_tokens, acc.chunk_usage, tokenizer, acc.chunk_logprobs, predicted)
    if tokenizer is None:
        return count_tokens(*args)
    # off the event loop: the Rust tokenizer releases the GIL, other streams keep their clocks
    try:
        return await asyncio.to_thread(count_tokens, *args)
    except asyncio.CancelledError:  # Ctrl-C while counting: the stream is done, keep it
        asyncio.current_task().uncancel()
        return count_tokens(*args)


def build_result(
    job: Job, acc: StreamAccumulator, tokens, status, run_t0_ns: int, t_end_ns: int, resent: bool = False
) -> RequestResult:
    """The record of one request from its finished stream (times in ns from perf_counter_ns)."""
    times = acc.token_times_ns
    t0 = acc.t_start_ns
    return RequestResult(
        suite=job.suite,
        prompt_index=job.prompt_index,
        warmup=job.warmup,
        concurrency=job.concurrency,
        rate=job.rate,
        ok=acc.error_kind is None,
        error_kind=acc.error_kind,
        error=acc.error,
        http_status=status,
        start_s=(t0 - run_t0_ns) / 1e9,
        end_s=(t_end_ns - run_t0_ns) / 1e9,
        ttft_ms=(times[0] - t0) / 1e6 if times else None,
        itl_ms=tuple((b - a) / 1e6 for a, b in zip(times, times[1:])),
        latency_ms=(times[-1] - t0) / 1e6 if times else None,
        output_tokens=tokens.output_tokens,
        token_count_source=tokens.token_count_source,
        chunk_tokens=tokens.chunk_tokens,
        decode_tok_s=chunks.decode_tok_s(tokens, times),
        output_chars=sum(len(t) for t in acc.texts),
        finish_reason=acc.finish_reason,
        response_id=acc.response_id,
        resent=resent,
        chunk_source=tokens.chunk_source,
        timings_tok_s=chunks.timings_tok_s(acc.timings),
    )
