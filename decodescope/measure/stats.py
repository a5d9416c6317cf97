"""Summaries of a measure run: per suite and load level, from the finished requests and
the server samples, warm-up excluded. Used live and by runfile.read_run, so a run file
alone reproduces its summary. Requests are added up one at a time and samples streamed
past the finished windows (Summary), so memory does not follow the run's size: each
spread is a spread.Spread (exact up to 20,000 values, then 1/1000-unit bins).

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
from decodescope.measure.spread import Spread, distribution

# a run file may be hostile: names past these are not held (a real sweep has a few groups,
# a few error kinds and sources)
MAX_GROUPS = 1000  # suites x load levels
MAX_NAMES = 20  # distinct error kinds, and token-count sources, per group; the rest: "other"


def summarize(requests, samples, interrupted: bool = False, slo: dict | None = None) -> dict:
    """The run summary: one entry per (suite, concurrency, rate) in run order, plus totals.
    slo: {"ttft_ms": x, "tpot_ms": y}, the limits a request must meet to count for goodput."""
    acc = Summary(slo)
    for r in requests:
        acc.add(r)
    return acc.result(samples, interrupted)


class Summary:
    """The run summary fed one finished request at a time, in bounded memory: per group
    counts, sums and Spreads, never the requests themselves (a run file of any size)."""

    def __init__(self, slo: dict | None = None):
        self.slo = slo
        self.groups: dict[tuple, _Group] = {}  # run order
        self.warmup = _Window()

    def add(self, r) -> bool:
        """Count a finished request; False (and nothing counted) for one that would open a
        group past MAX_GROUPS."""
        if r.warmup:
            self.warmup.add(r)
            return True
        key = (r.suite, r.concurrency, r.rate)
        if key not in self.groups:
            if len(self.groups) >= MAX_GROUPS:
                return False
            self.groups[key] = _Group(key, self.slo)
        self.groups[key].add(r)
        return True

    def result(self, samples, interrupted: bool = False) -> dict:
        windows = {k: g.window() for k, g in self.groups.items()}
        # the warm-up's own window too, so a line that may be its request's is not taken for
        # the first suite's
        others = {"warmup": self.warmup.window()} if self.warmup.n else {}
        within = windows | others
        server = {k: _ServerFigures() for k in windows}  # from the samples that count for each group
        total = _ServerFigures()
        for s in samples:  # an iterable: read_run may stream them from the file again
            for k in _groups_of(s, within):
                if k in server:
                    server[k].add(s)
                    total.add(s)
        groups = [g.result(server[k].result()) for k, g in self.groups.items()]
        out = {
            "suites": groups,
            "requests_ok": sum(g.ok for g in self.groups.values()),
            "requests_failed": sum(g.n - g.ok for g in self.groups.values()),
            "warmup_requests": self.warmup.n,
            "interrupted": interrupted,
        }
        out.update(total.result())
        return out


class _Window:
    def __init__(self):
        self.n, self.start, self.end = 0, math.inf, -math.inf

    def add(self, r) -> None:
        self.n += 1
        self.start, self.end = min(self.start, r.start_s), max(self.end, r.end_s)

    def window(self) -> tuple[float, float]:
        return self.start, self.end


class _Group(_Window):
    """One (suite, concurrency, rate): what its summary entry needs, request by request."""

    def __init__(self, key: tuple, slo: dict | None):
        super().__init__()
        self.key, self.slo = key, slo
        self.ok, self.resent, self.met, self.tokens = 0, 0, 0, 0
        self.errors: Counter = Counter()
        self.count_sources: set = set()
        self.chunk_sources: set = set()
        names = ("ttft_ms", "itl_ms", "decode_tok_s", "tpot_ms", "latency_ms", "output_tokens", "timings")
        self.d = {name: Spread() for name in names}
        self.known, self.after_first = Spread(), Spread()  # tokens of every chunk; of every chunk but the first
        self.gaps, self.even_after_first = 0, 0.0  # for runs without per-chunk counts

    def add(self, r) -> None:
        super().add(r)
        self.resent += r.resent  # sent again on a new connection
        if not r.ok:
            self.errors[_bounded(r.error_kind, self.errors)] += 1
            return
        self.ok += 1
        self.tokens += r.output_tokens
        tpot = chunks.tpot_ms(r.latency_ms, r.ttft_ms, r.output_tokens)
        for name, v in (("ttft_ms", r.ttft_ms), ("decode_tok_s", r.decode_tok_s), ("tpot_ms", tpot),
                        ("latency_ms", r.latency_ms), ("output_tokens", r.output_tokens),
                        ("timings", r.timings_tok_s or None)):
            self.d[name].add(v)
        self.d["itl_ms"].extend(r.itl_ms)
        if self.slo:
            self.met += _meets(r.ttft_ms, tpot, self.slo)
        self.count_sources.add(_bounded(r.token_count_source, self.count_sources))
        self.chunk_sources.add(_bounded(r.chunk_source or "even", self.chunk_sources))
        if r.chunk_tokens:
            self.known.extend(r.chunk_tokens)
            self.after_first.extend(r.chunk_tokens[1:])
        self.gaps += len(r.itl_ms)
        self.even_after_first += r.output_tokens * len(r.itl_ms) / (len(r.itl_ms) + 1)

    def result(self, server: dict) -> dict:
        suite, concurrency, rate = self.key
        start, end = self.window()
        g = {
            "name": suite,
            "concurrency": concurrency,
            "rate": rate,
            "requests_ok": self.ok,
            "requests_failed": self.n - self.ok,
            "errors": dict(self.errors),
            "resent": self.resent,
            **{name: self.d[name].result() for name in
               ("ttft_ms", "itl_ms", "decode_tok_s", "tpot_ms", "latency_ms", "output_tokens")},
            "tokens_per_chunk": self._tokens_per_chunk(),
            **self._throughputs(end - start),
            "token_count_source": sorted(self.count_sources),
            "window_s": [start, end],
        }
        g.update(server)
        if "server_decode_tok_s" not in g and self.d["timings"].n:  # llama.cpp's own per-request rate
            g["server_decode_tok_s"] = self.d["timings"].result() | {"source": "timings"}
        g.update(self._chunk_rounds(g["itl_ms"]))
        # one decode round per request, as the model counts it: the server's tokens per round
        # over the client's per-request rate (the reference case's 3.08 / 55.59 tok/s = 55.4 ms); the
        # median request, as a short one (an early stop) gives a noisy rate
        accept, decode = g.get("accept_len"), g["decode_tok_s"]
        g["round_ms"] = 1000 * accept["mean"] / decode["p50"] if accept and decode["p50"] else None
        return g

    def _tokens_per_chunk(self) -> dict:
        # every chunk whose count is known; else one figure, the totals spread evenly (estimate)
        sources = sorted(self.chunk_sources)
        if self.known.n:
            return self.known.result() | {"source": sources}
        n = self.gaps + self.ok  # chunks: one more than the gaps, per request
        return distribution([]) | {"n": n, "mean": self.tokens / n if n else None, "source": sources}

    def _throughputs(self, duration_s: float) -> dict:
        """As `vllm bench serve` counts them: completed requests and their output tokens per
        second of the group's window, all streams together; goodput: the requests that met
        every limit of slo, per second."""
        if duration_s <= 0:
            return {"request_throughput": None, "output_throughput": None}
        out = {"request_throughput": self.ok / duration_s, "output_throughput": self.tokens / duration_s}
        if self.slo:
            out["goodput"] = self.met / duration_s
        return out

    def _chunk_rounds(self, itl: dict) -> dict:
        """When chunks carry several tokens (speculative rounds), the client's own view of a
        round: tokens per chunk after the first (an accept-length estimate) and the median gap
        between chunks (a round time), when the median chunk carries more than one token.
        Equal to the server's only without a stream interval."""
        if self.after_first.n:
            after = self.after_first.result()
            # most chunks one token, a few several (text held back until it is valid UTF-8):
            # not rounds
            if after["p50"] <= 1:
                return {}
            accept = after["mean"]
        else:  # no per-chunk counts: tokens after an evenly split first chunk, per later chunk
            accept = self.even_after_first / self.gaps if self.gaps else None
        if accept is None or accept <= 1.0 + 1e-9 or not itl.get("n"):
            return {}
        return {"client_accept_len": accept, "client_round_ms": itl["p50"]}


def _bounded(name: str, held) -> str:
    return name if name in held or len(held) < MAX_NAMES else "other"


def _meets(ttft_ms, tpot_ms, slo: dict) -> bool:
    measured = {"ttft_ms": ttft_ms, "tpot_ms": tpot_ms}
    return all(measured[k] is not None and measured[k] <= limit for k, limit in slo.items())


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


class _ServerFigures:
    """The server's figures over the samples that count for a group (or the whole run), fed
    one at a time. The server log is the finer source when both are there; /metrics fills
    in otherwise."""

    NAMES = ("accept_len", "server_gen_tok_s", "server_decode_tok_s")
    SOURCES = ("server_log", "metrics")

    def __init__(self):
        self.d = {(name, source): Spread() for name in self.NAMES for source in self.SOURCES}

    def add(self, s: dict) -> None:
        source = s["type"]
        if source not in self.SOURCES:
            return
        self.d[("accept_len", source)].add(s.get("accept_len"))
        rate = s.get("gen_tok_s")
        if rate is not None and rate > 0:  # an idle window says nothing about speed
            # a per-request line's rate is that request's, not the server's total
            self.d[("server_decode_tok_s" if s.get("per_request") else "server_gen_tok_s", source)].add(rate)

    def result(self) -> dict:
        out = {}
        for name in self.NAMES:
            source = next((src for src in self.SOURCES if self.d[(name, src)].n), None)
            if source:
                out[name] = self.d[(name, source)].result() | {"source": source}
        return out
