"""A real OpenAI-compatible SSE server that misbehaves on purpose, for tests and benchmarks.

Run: python tests/scripted_server.py --port P [--interval-ms 20 --tokens 64 --log F --send-log F --lockstep]

Each request's behaviour comes from its "model" field, "k=v,k=v" (unknown model names
take the defaults), so one server process serves every fault test:
  tokens=N        text chunks to stream                      (--tokens)
  interval_ms=X   gap between text chunks, absolute schedule  (--interval-ms)
  tpc=K           tokens per chunk, as speculative decoding emits them: one round of K tokens
                  per interval, K words of text
  hold=H          the first H rounds are held back (as text held until it is valid UTF-8):
                  the first content chunk comes at round H with all (H + 1) * K tokens
  cusage=0        ignore stream_options.continuous_usage_stats (by default honoured: the
                  running completion_tokens on every chunk, as vLLM sends it)
  timings=1       llama-server's "timings" object on the final chunk
A request with "logprobs" gets one logprobs entry per token on each chunk.
  reasoning=N     the first N chat chunks are reasoning_content, not content
  usage=0         ignore stream_options.include_usage
  done=0          no [DONE] line (transformers serve sends none)
  fault=NAME      http (with code=NNN), hangup (close before answering), drop, malformed,
                  stall, error_event, no_tokens
  every=K         the fault hits every K-th request of this model name (default 1: all)
  after=N         mid-stream faults strike after N text chunks (default 3)
  key=SECRET      answer 401 unless the request carries "Authorization: Bearer SECRET"
  close=1         close the connection after the response, keep-alive header or not (as
                  llama-server does after a stream): a pooled connection goes stale
Every text chunk carries "t_ns", the server's perf_counter_ns just before the write (the
same CLOCK_MONOTONIC the client reads), so a benchmark can compare gaps exactly; --send-log
writes them per response with the tokens of each chunk.
--log writes SGLang-style "Decode batch" lines; --llamacpp-log llama-server's per-request
print_timing lines (the format of tools/server/server-context.cpp) as each request ends;
GET /metrics serves vLLM-style counters.
"""

import argparse
import asyncio
import collections
import json
import time
import uuid

from aiohttp import web


class Steps:
    """One clock for every stream of one interval (--lockstep): they advance together, one
    chunk each per step, as the streams of one batched decode step do."""

    def __init__(self, interval_s: float):
        self.interval_s = interval_s
        self.at = None  # loop time of the next step
        self.waiting: list[asyncio.Future] = []

    async def next(self) -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.waiting.append(fut)
        if len(self.waiting) == 1:  # the first stream to ask schedules the step
            self.at = max(self.at + self.interval_s, loop.time()) if self.at else loop.time() + self.interval_s
            loop.call_at(self.at, self.release)
        await fut

    def release(self) -> None:
        waiting, self.waiting = self.waiting, []
        for fut in waiting:
            fut.set_result(None)


class Scripted:
    def __init__(self, args):
        self.args = args
        self.count = collections.Counter()  # requests seen per model string
        self.gen_tokens = 0  # counters behind /metrics and the log lines
        self.drafts = 0
        self.accepted = 0
        self.running = 0
        self.rounds_since_log = 0
        self.tokens_since_log = 0
        self.last_log = time.monotonic()
        self.steps: dict[float, Steps] = {}
        self.log = open(args.log, "a", buffering=1) if args.log else None
        self.send_log = open(args.send_log, "a", buffering=1) if args.send_log else None
        self.llamacpp_log = open(args.llamacpp_log, "a", buffering=1) if args.llamacpp_log else None
        self.tasks = 0

    def params(self, model: str) -> dict:
        a = self.args
        p = {"tokens": a.tokens, "interval_ms": a.interval_ms, "tpc": a.tpc, "every": 1, "after": 3, "code": 500}
        p.update({"reasoning": 0, "usage": 1, "done": 1, "fault": None, "key": None, "close": 0})
        p.update({"hold": 0, "cusage": 1, "timings": 0})
        for part in model.split(","):
            k, sep, v = part.partition("=")
            if sep and k in p:
                p[k] = v if k in ("fault", "key") else float(v) if k == "interval_ms" else int(v)
        self.count[model] += 1
        if p["fault"] and self.count[model] % p["every"] != 0:
            p["fault"] = None
        return p

    async def wait_chunk(self, interval_ms: float, t0: float, i: int) -> None:
        if self.args.lockstep:
            await self.steps.setdefault(interval_ms, Steps(interval_ms / 1e3)).next()
        else:  # each stream on its own absolute schedule
            await asyncio.sleep(max(0.0, t0 + (i + 1) * interval_ms / 1e3 - time.monotonic()))

    def round_done(self, tpc: int) -> None:
        # one text chunk = one decode round that produced tpc tokens (tpc - 1 accepted drafts + 1 bonus)
        self.gen_tokens += tpc
        self.drafts += 1
        self.accepted += tpc - 1
        self.rounds_since_log += 1
        self.tokens_since_log += tpc
        if self.log and self.rounds_since_log >= self.args.log_every:
            self.write_log_line(tpc)

    def write_log_line(self, tpc: int) -> None:
        now = time.monotonic()
        gen = self.tokens_since_log / max(now - self.last_log, 1e-9)
        accept_len = self.tokens_since_log / self.rounds_since_log
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        self.log.write(
            f"[{stamp}] Decode batch, #running-req: {self.running}, #token: {self.gen_tokens}, token usage: 0.00, "
            f"accept len: {accept_len:.2f}, accept rate: {(accept_len - 1) / self.args.draft_steps:.2f}, "
            f"cuda graph: False, gen throughput (token/s): {gen:.2f}, #queue-req: 0\n"
        )
        self.rounds_since_log = self.tokens_since_log = 0
        self.last_log = now

    def write_llamacpp_lines(self, tokens: int, rounds: int, eval_s: float) -> None:
        # one request finished: what llama-server's print_timing writes for it
        self.tasks += 1
        head = f"slot print_timing: id  0 | task {self.tasks} | "
        ms = eval_s * 1e3
        accepted, drafted = tokens - rounds, rounds * self.args.draft_steps
        self.llamacpp_log.write(
            f"{head}prompt eval time =       2.00 ms /     7 tokens (    0.29 ms per token,  3500.00 tokens per second)\n"
            f"{head}       eval time = {ms:10.2f} ms / {tokens:5d} tokens ({ms / tokens:8.2f} ms per token, "
            f"{tokens / eval_s:8.2f} tokens per second)\n"
            f"{head}      total time = {ms + 2:10.2f} ms / {tokens + 7:5d} tokens\n"
            f"{head}draft acceptance = {accepted / drafted:0.5f} ({accepted:5d} accepted / {drafted:5d} generated), "
            f"mean len = {1 + accepted / rounds:5.2f}\n"
        )

    def record(self, rid: str, sent_ns: list, sent_tokens: list, rounds: int, tpc: int, elapsed_s: float) -> None:
        # one response done: its send times (--send-log) and llama-server's lines for it
        if self.send_log:
            self.send_log.write(json.dumps({"id": rid, "t_ns": sent_ns, "tokens": sent_tokens}) + "\n")
        if self.llamacpp_log and rounds:
            self.write_llamacpp_lines(rounds * tpc, rounds, elapsed_s)

    def metrics_text(self) -> str:
        k = self.args.draft_steps
        rows = [
            ("vllm:generation_tokens_total", "counter", self.gen_tokens),
            ("vllm:spec_decode_num_drafts_total", "counter", self.drafts),
            ("vllm:spec_decode_num_draft_tokens_total", "counter", self.drafts * k),
            ("vllm:spec_decode_num_accepted_tokens_total", "counter", self.accepted),
            ("vllm:num_requests_running", "gauge", self.running),
        ]
        out = []
        for name, kind, value in rows:
            base = name.removesuffix("_total") if kind == "counter" else name
            out += [f"# HELP {base} scripted", f"# TYPE {base} {kind}", f'{name}{{model_name="scripted"}} {value}']
        return "\n".join(out) + "\n"


def chunk(api: str, rid: str, text: str | None, kind: str = "content", finish=None, logprobs=None, **extra) -> dict:
    if api == "chat":
        delta = {kind: text} if text is not None else {}
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        obj = "chat.completion.chunk"
    else:
        choice = {"index": 0, "text": text or "", "finish_reason": finish}
        obj = "text_completion"
    if logprobs is not None:
        choice["logprobs"] = logprobs
    return {"id": rid, "object": obj, "model": "scripted", "choices": [choice], **extra}


async def stream(request: web.Request, api: str) -> web.StreamResponse:
    s: Scripted = request.app["scripted"]
    body = await request.json()
    p = s.params(str(body.get("model", "")))
    if p["key"] and request.headers.get("Authorization") != f"Bearer {p['key']}":
        return web.json_response({"error": {"message": "bad API key", "code": 401}}, status=401)
    if p["fault"] == "hangup":
        request.transport.close()
        return web.Response()
    if p["fault"] == "http":
        return web.json_response({"error": {"message": "scripted failure", "code": p["code"]}}, status=p["code"])
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    s.running += 1
    try:
        await emit(request, resp, s, p, api, body)
    finally:
        s.running -= 1
    if p["close"]:
        await resp.write_eof()
        request.transport.close()
    return resp


async def emit(request, resp, s: Scripted, p: dict, api: str, body: dict) -> None:
    rid = f"scripted-{uuid.uuid4().hex[:12]}"
    opts = body.get("stream_options") or {}
    cusage = p["usage"] and p["cusage"] and opts.get("include_usage") and opts.get("continuous_usage_stats")

    async def send(obj) -> None:
        await resp.write(b"data: " + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b"\n\n")

    def usage(n: int) -> dict:
        return {"usage": {"prompt_tokens": 7, "completion_tokens": n, "total_tokens": 7 + n}}

    if api == "chat":  # a role-only chunk, sent at once: not a token
        role = {"index": 0, "delta": {"role": "assistant", "content": ""}}
        first = {"id": rid, "object": "chat.completion.chunk", "model": "scripted", "choices": [role]}
        await send(first | (usage(0) if cusage else {}))
    n = 0 if p["fault"] == "no_tokens" else p["tokens"]
    if body.get("ignore_eos"):  # as vLLM: exactly max_tokens (whole rounds of tpc)
        n = body["max_tokens"] // p["tpc"]
    sent_ns, sent_tokens, held, t0 = [], [], [], time.monotonic()
    for i in range(n):
        await s.wait_chunk(p["interval_ms"], t0, i)
        if i == 0:
            t_first_round = time.monotonic()
        if i == p["after"] and await fault_strikes(request, resp, p, send):
            return
        s.round_done(p["tpc"])
        held += [f"t{i}" if p["tpc"] == 1 else f"t{i}.{j}" for j in range(p["tpc"])]
        if i < p["hold"]:
            continue  # held back (e.g. until the text is valid UTF-8): sent with a later round
        kind = "reasoning_content" if i < p["reasoning"] else "content"
        extra = usage(sum(sent_tokens) + len(held)) if cusage else {}
        if body.get("logprobs"):
            extra["logprobs"] = logprobs(api, held)
        t_ns = time.perf_counter_ns()
        await send(chunk(api, rid, "".join(w + " " for w in held), kind, t_ns=t_ns, **extra))
        sent_ns.append(t_ns)
        sent_tokens.append(len(held))
        held = []
        if i % 4 == 0:
            await resp.write(b": keep-alive\n\n")  # SSE comment: clients must skip it
    total = n * p["tpc"]
    last = {"timings": timings(total, time.monotonic() - t_first_round)} if p["timings"] and n else {}
    await send(chunk(api, rid, None, finish="length", **last))
    if p["usage"] and opts.get("include_usage"):
        await send({"id": rid, "object": "chunk", "model": "scripted", "choices": []} | usage(total))
    if p["done"]:
        await send(b"[DONE]")
    s.record(rid, sent_ns, sent_tokens, n, p["tpc"], time.monotonic() - t0)


def logprobs(api: str, tokens: list[str]) -> dict:
    # one entry per token, as OpenAI's chat and legacy completions formats have them
    if api == "chat":
        return {"content": [{"token": t, "logprob": -0.5, "bytes": None, "top_logprobs": []} for t in tokens]}
    return {"tokens": tokens, "token_logprobs": [-0.5] * len(tokens), "top_logprobs": None, "text_offset": []}


def timings(tokens: int, since_first_s: float) -> dict:
    # llama-server's final-chunk timings: tokens generated and the time since the first one
    ms = since_first_s * 1e3
    return {
        "prompt_n": 7,
        "prompt_ms": 2.0,
        "predicted_n": tokens,
        "predicted_ms": ms,
        "predicted_per_second": tokens / since_first_s,
    }


async def fault_strikes(request, resp, p: dict, send) -> bool:
    fault = p["fault"]
    if fault == "drop":
        request.transport.close()  # abrupt: the chunked body never completes
        return True
    if fault == "malformed":
        await send(b'{"choices": [{"delta": {"content": "unterminated')
        return True
    if fault == "error_event":
        await send({"error": {"message": "scripted mid-stream error", "code": 500}})
        return True
    if fault == "stall":
        await asyncio.sleep(3600)
    return False


async def models(request: web.Request) -> web.Response:
    a = request.app["args"]
    model = {"id": a.model_id, "object": "model"} | ({"owned_by": a.owned_by} if a.owned_by else {})
    return web.json_response({"object": "list", "data": [model]})


async def metrics(request: web.Request) -> web.Response:
    return web.Response(text=request.app["scripted"].metrics_text(), content_type="text/plain")


def make_app(args) -> web.Application:
    app = web.Application()
    app["args"], app["scripted"] = args, Scripted(args)
    app.router.add_post("/v1/chat/completions", lambda r: stream(r, "chat"))
    app.router.add_post("/v1/completions", lambda r: stream(r, "completions"))
    app.router.add_get("/v1/models", models)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/health", lambda r: web.json_response({"status": "ok"}))
    return app


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description="scripted OpenAI-compatible SSE server")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--interval-ms", type=float, default=2.0)
    ap.add_argument("--tpc", type=int, default=1, help="tokens per chunk")
    ap.add_argument("--draft-steps", type=int, default=3)
    ap.add_argument("--model-id", default="scripted")
    ap.add_argument("--owned-by", help="the engine /v1/models names (vllm honours ignore_eos here)")
    ap.add_argument("--log", help="append SGLang-style Decode batch lines here")
    ap.add_argument("--log-every", type=int, default=8, help="decode rounds per log line")
    ap.add_argument("--llamacpp-log", help="append llama-server print_timing lines here, one request each")
    ap.add_argument("--send-log", help="append each response's text-chunk send times (perf_counter_ns) here")
    ap.add_argument("--lockstep", action="store_true", help="streams of one interval send their chunks together")
    return ap.parse_args(argv)


if __name__ == "__main__":
    a = parse_args()
    # handler_cancellation: a stalled handler ends when its client gives up, so shutdown is quick
    web.run_app(
        make_app(a),
        host=a.host,
        port=a.port,
        print=lambda *_: print("ready", flush=True),
        shutdown_timeout=1,
        handler_cancellation=True,
    )
