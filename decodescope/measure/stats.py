"""Summaries of a measure run: per suite and load level, from the finished requests and
the server samples, warm-up excluded. Used live and by runfile.read_run, so a run file
alone reproduces its summary.

Server samples are attributed to a group by time: a sample counts for a group when its
whole window (time_s - window_s .. time_s) lies inside the group's run window. That drops
the log line or scrape interval that straddles idle time, the warm-up or the previous
suite, as the reference case's first "2.89 tok/s" line does. A per-request sample (llama.cpp: one
request's figures, written as it finished, some time in written_s .. time_s) counts for
the one group inside whose window that request's decode (window_s long, ending when the
line was written) can have run; a line that fits two windows (a request shorter than the
log poll, at a boundary, the warm-up's included) counts for neither. Its rate is that request's, so it goes to
server_decode_tok_s, not to the server's total.
"""

import math
from collections import Counter

from decodescope.measure import chunks

PERCENTILES = (50, 90, 99)


def distribution(values) -> dict:
    v = sorted(x for x in values if x is not None and math.isfinite(x))
    out = {"n": len(v), "mean": sum(v) / len(v) if v else None}
    for q in PERCENTILES:
        out[f"p{q}"] = _percentile(v, q) if v else None
    out["min"], out["max"] = (v[0], v[-1]) if v else (None, None)
    return out


def _percentile(v: list[float], q: float) -> float:
    # linear interpolation between closest ranks (numpy's default)
    pos = (len(v) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summarize(requests, samples, interrupted: bool = False, slo: dict | None = None) -> dict:
    """The run summary: one entry per (suite, concurrency, rate) in run order, plus totals.
    slo: {"ttft_ms": x, "tpot_ms": y}, the limits a request must meet to count for goodput."""
    measured = [r for r in requests if not r.warmup]
    keys = list(dict.fromkeys((r.suite, r.concurrency, r.rate) for r in measured))
    results = {k: [r for r in measured if (r.suite, r.concurrency, r.rate) == k] for k in keys}
    windows = {k: (min(r.start_s for r in rs), max(r.end_s for r in rs)) for k, rs in results.items()}
    warmup = [r for r in requests if r.warmup]
    # the warm-up's own window too, so a line that may be its request's is not taken for
    # the first suite's
    others = {"warmup": (min(r.start_s for r in warmup), max(r.end_s for r in warmup))} if warmup else {}
    counted = {k: [] for k in keys}  # the server samples that count for each group
    for s in samples:
        for k in _groups_of(s, windows | others):
            if k in counted:
                counted[k].append(s)
    groups = [_group(k, results[k], windows[k], counted[k], slo) for k in keys]
    steady = [p for g in groups for p in g.pop("_steady")]
    out = {
        "suites": groups,
        "requests_ok": sum(r.ok for r in measured),
        "requests_failed": sum(not r.ok for r in measured),
        "warmup_requests": len(requests) - len(measured),
        "interrupted": interrupted,
    }
    out.update(_server_figures(steady))
    return out


def _group(key, results, window, steady, slo) -> dict:
    suite, concurrency, rate = key
    ok = [r for r in results if r.ok]
    start, end = window
    g = {
        "name": suite,
        "concurrency": concurrency,
        "rate": rate,
        "requests_ok": len(ok),
        "requests_failed": len(results) - len(ok),
        "errors": dict(Counter(r.error_kind for r in results if not r.ok)),
        "resent": sum(r.resent for r in results),  # sent again on a new connection
        "ttft_ms": distribution(r.ttft_ms for r in ok),
        "itl_ms": distribution(x for r in ok for x in r.itl_ms),
        "decode_tok_s": distribution(r.decode_tok_s for r in ok),
        "tpot_ms": distribution(chunks.tpot_ms(r.latency_ms, r.ttft_ms, r.output_tokens) for r in ok),
        "latency_ms": distribution(r.latency_ms for r in ok),
        "output_tokens": distribution(r.output_tokens for r in ok),
        "tokens_per_chunk": _tokens_per_chunk(ok),
        **_throughputs(ok, end - start, slo),
        "token_count_source": sorted({r.token_count_source for r in ok}),
        "window_s": [start, end],
        "_steady": steady,
    }
    g.update(_server_figures(steady))
    timings = [r.timings_tok_s for r in ok if r.timings_tok_s]
    if "server_decode_tok_s" not in g and timings:  # llama.cpp's own per-request rate, from its last chunk
        g["server_decode_tok_s"] = distribution(timings) | {"source": "timings"}
    g.update(_chunk_rounds(ok, g["itl_ms"]))
    # one decode round per request, as the model counts it: the server's tokens per round
    # over the client's per-request rate (the reference case's 3.08 / 55.59 tok/s = 55.4 ms); the
    # median request, as a short one (an early stop) gives a noisy rate
    accept, decode = g.get("accept_len"), g["decode_tok_s"]
    g["round_ms"] = 1000 * accept["mean"] / decode["p50"] if accept and decode["p50"] else None
    return g


def _tokens_per_chunk(ok) -> dict:
    # every chunk whose count is known; else one figure, the totals spread evenly (estimate)
    known = [x for r in ok if r.chunk_tokens for x in r.chunk_tokens]
    sources = sorted({r.chunk_source or "even" for r in ok})
    if known:
        return distribution(known) | {"source": sources}
    tokens, n = sum(r.output_tokens for r in ok), sum(len(r.itl_ms) + 1 for r in ok)
    return distribution([]) | {"n": n, "mean": tokens / n if n else None, "source": sources}


def _throughputs(ok, duration_s: float, slo: dict | None) -> dict:
    """As `vllm bench serve` counts them: completed requests and their output tokens per
    second of the group's window, all streams together; goodput: the requests that met
    every limit of slo, per second."""
    if duration_s <= 0:
        return {"request_throughput": None, "output_throughput": None}
    out = {
        "request_throughput": len(ok) / duration_s,
        "output_throughput": sum(r.output_tokens for r in ok) / duration_s,
    }
    if slo:
        out["goodput"] = sum(_meets(r, slo) for r in ok) / duration_s
    return out


def _meets(r, slo: dict) -> bool:
    measured = {"ttft_ms": r.ttft_ms, "tpot_ms": chunks.tpot_ms(r.latency_ms, r.ttft_ms, r.output_tokens)}
    return all(measured[k] is not None and measured[k] <= limit for k, limit in slo.items())


def _chunk_rounds(ok, itl: dict) -> dict:
    """When chunks carry several tokens (speculative rounds), the client's own view of a
    round: tokens per chunk after the first (an accept-length estimate) and the median gap
    between chunks (a round time), when the median chunk carries more than one token.
    Equal to the server's only without a stream interval."""
    after_first = [x for r in ok if r.chunk_tokens for x in r.chunk_tokens[1:]]
    if after_first:
        # most chunks one token, a few several (text held back until it is valid UTF-8):
        # not rounds
        if _percentile(sorted(after_first), 50) <= 1:
            return {}
        accept = sum(after_first) / len(after_first)
    else:  # no per-chunk counts: tokens after an evenly split first chunk, per later chunk
        n = sum(len(r.itl_ms) for r in ok)
        accept = sum(r.output_tokens * len(r.itl_ms) / (len(r.itl_ms) + 1) for r in ok) / n if n else None
    if accept is None or accept <= 1.0 + 1e-9 or not itl.get("n"):
        return {}
    return {"client_accept_len": accept, "client_round_ms": itl["p50"]}


LOG_AFTER_LAST_BYTE_S = 0.05  # a server logs a finished request just after its last chunk


def _groups_of(sample: dict, windows: dict) -> list:
    if sample.get("warmup") or sample.get("window_s") is None:
        return []
    t, w = sample["time_s"], sample["window_s"]
    if not sample.get("per_request"):
        return [k for k, (start, end) in windows.items() if t - w >= start and t <= end]
    written = sample["written_s"]
    fits = [
        k
        for k, (start, end) in windows.items()
        if max(written, start + w) < min(t, end + LOG_AFTER_LAST_BYTE_S)  # some write time fits
    ]
    return fits if len(fits) == 1 else []


def _server_figures(steady: list[dict]) -> dict:
    # the server log is the finer source when both are there; /metrics fills in otherwise
    out = {}
    total = [s for s in steady if not s.get("per_request")]
    for key, name, samples in (
        ("accept_len", "accept_len", steady),
        ("gen_tok_s", "server_gen_tok_s", total),
        ("gen_tok_s", "server_decode_tok_s", [s for s in steady if s.get("per_request")]),
    ):
        for source in ("server_log", "metrics"):
            values = [s[key] for s in samples if s["type"] == source and s.get(key) is not None]
            if key == "gen_tok_s":
                values = [v for v in values if v > 0]  # an idle window says nothing about speed
            if values:
                out[name] = distribution(values) | {"source": source}
                break
    return out
