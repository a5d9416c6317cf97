"""Read a server's Prometheus `/metrics` page (trtllm-serve's: JSON iteration statistics)
and turn two scrapes into rates.

Names per engine as each defines them: vLLM vllm/v1/metrics/loggers.py
(https://github.com/vllm-project/vllm), SGLang python/sglang/srt/metrics/collector.py
(https://github.com/sgl-project/sglang), llama.cpp tools/server/server.cpp
(https://github.com/ggml-org/llama.cpp).
Rates come from counter deltas between two scrapes, not from lifetime averages; a
gauge is used only where the engine has no counter (SGLang's accept length is a gauge
over the same window as its log line). llama.cpp's `*_tokens_seconds` gauges are never
read: every scrape resets them.

trtllm-serve's `/metrics` is no Prometheus page but a JSON list of the IterationStats of
the iterations since the previous call (https://github.com/NVIDIA/TensorRT-LLM
docs/source/commands/trtllm-serve; fields: serverstats/trtllm_log.py). Each object
becomes series labelled by its `iter`: `trtllm:numGenRequests` and `trtllm:generated_tokens`
(numGenRequests x tokens per request, where the object says how many) of every iteration,
`trtllm:decode_step_ms` (its time) of the generation-only ones, `trtllm:numActiveRequests`.
The page itself is the interval's count: no delta is taken. Its Prometheus page
(/prometheus/metrics, names `trtllm_*` in 2026) counts generation tokens per finished
request and has a time-per-output-token histogram."""

import json

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from decodescope.errors import DecodescopeError

# "trtllm:" names the series of trtllm-serve's JSON page; "trtllm_" its Prometheus page
# (/prometheus/metrics, tensorrt_llm/metrics/collector.py, 2026)
ENGINE_PREFIXES = {"sglang:": "sglang", "vllm:": "vllm", "llamacpp:": "llamacpp", "trtllm:": "trtllm",
                   "trtllm_": "trtllm"}


@dataclass(frozen=True)
class Series:
    name: str  # sample name as exposed, e.g. "vllm:generation_tokens_total"
    labels: dict
    value: float


@dataclass(frozen=True)
class MetricsSample:
    time_s: float  # when the page was scraped, epoch seconds
    engine: str | None  # from the metric-name prefix; None when no engine metric is present
    series: tuple[Series, ...]  # engine metrics only (names with an ENGINE_PREFIXES prefix)

    def total(self, name: str, **labels) -> float | None:
        """Sum of the series called `name` whose labels include `labels`; None if none."""
        values = [s.value for s in self.series if s.name == name and _match(s.labels, labels)]
        return sum(values) if values else None

    def mean(self, name: str, **labels) -> float | None:
        values = [s.value for s in self.series if s.name == name and _match(s.labels, labels)]
        return sum(values) / len(values) if values else None

    def to_dict(self) -> dict:
        return {
            "time_s": self.time_s,
            "engine": self.engine,
            "series": [{"name": s.name, "labels": s.labels, "value": s.value} for s in self.series],
        }

    @classmethod
    def from_dict(cls, d: dict) -> "MetricsSample":
        series = tuple(Series(s["name"], dict(s["labels"]), float(s["value"])) for s in d["series"])
        return cls(float(d["time_s"]), d.get("engine"), series)


def _match(have: dict, want: dict) -> bool:
    return all(have.get(k) == v for k, v in want.items())


def parse_metrics(text: str, time_s: float) -> MetricsSample:
    """A `/metrics` exposition (Prometheus text format, or trtllm-serve's JSON list)
    scraped at `time_s`."""
    if text.lstrip().startswith("["):
        return MetricsSample(time_s, "trtllm", _trtllm_series(text))
    try:
        series = _series(text)
    except ValueError:
        # one malformed line must not lose the page: parse line by line, skip the bad ones
        series = []
        for line in text.splitlines():
            if line.strip() and not line.startswith("#"):
                try:
                    series += _series(line)
                except ValueError:
                    continue
    kept = tuple(s for s in series if _engine_of(s.name))
    engines = [_engine_of(s.name) for s in kept]
    engine = max(set(engines), key=engines.count) if engines else None
    return MetricsSample(time_s, engine, kept)


def _series(text: str) -> list[Series]:
    out = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if not s.name.endswith("_created"):  # creation timestamps, not measurements
                out.append(Series(s.name, dict(s.labels), float(s.value)))
    return out


def _trtllm_series(text: str) -> tuple[Series, ...]:
    """The series of trtllm-serve's JSON page (see the module's doc); objects that are no
    IterationStats, or whose figures are out of range, are left out."""
    from decodescope.serverstats.logvalues import Rejected
    from decodescope.serverstats.trtllm_log import json_accept, json_step_s, stats_record

    try:
        objs = json.loads(text)
    except ValueError:
        return ()
    out = []
    for obj in objs if isinstance(objs, list) else ():
        try:
            p = stats_record(obj)
        except Rejected:
            continue
        if p is None:
            continue
        f, label = p.fields, {"iter": str(p.fields.get("iter"))}
        accept = json_accept(f)
        if accept is not None:
            out += [Series("trtllm:numGenRequests", label, float(f["numGenRequests"])),
                    Series("trtllm:generated_tokens", label, f["numGenRequests"] * accept)]
        if p.kind == "decode" and f["numGenRequests"] and json_step_s(f):
            out.append(Series("trtllm:decode_step_ms", label, 1000 * json_step_s(f)))
        if isinstance(f.get("numActiveRequests"), int):
            out.append(Series("trtllm:numActiveRequests", label, float(f["numActiveRequests"])))
    return tuple(out)


def _engine_of(name: str) -> str | None:
    for prefix, engine in ENGINE_PREFIXES.items():
        if name.startswith(prefix):
            return engine
    return None


def derive(prev: MetricsSample, cur: MetricsSample) -> dict:
    """Rates over the interval between two scrapes of the same server:
    gen_tok_s, accept_len (incl. bonus), accept_rate (drafts only where the engine has
    counters; SGLang's gauge definition depends on its version), running_reqs, and
    ttft/itl/e2e means in ms from histogram sum/count deltas. `sources` names the
    metric behind each value. Values the page lacks are None."""
    dt = cur.time_s - prev.time_s
    if dt <= 0:
        raise DecodescopeError(
            f"metrics samples are not in time order ({prev.time_s} then {cur.time_s})",
            "pass the earlier scrape first",
        )
    engine = cur.engine or prev.engine
    out = {
        "engine": engine,
        "interval_s": dt,
        "gen_tok_s": None,
        "accept_len": None,
        "accept_rate": None,
        "running_reqs": None,
        "ttft_ms_mean": None,
        "itl_ms_mean": None,
        "e2e_ms_mean": None,
        "sources": {},
    }
    rules = _RULES.get(engine)
    if rules:
        rules(_Delta(prev, cur), out)
    return out


class _Delta:
    """Counter deltas between two scrapes; a counter that went down was reset, and
    then its whole current value is the increase (Prometheus' rule)."""

    def __init__(self, prev: MetricsSample, cur: MetricsSample):
        self.prev, self.cur = prev, cur
        self.dt = cur.time_s - prev.time_s

    def of(self, name: str, **labels) -> float | None:
        a, b = self.prev.total(name, **labels), self.cur.total(name, **labels)
        if a is None or b is None:
            return None
        return b - a if b >= a else b

    def rate(self, name: str, **labels) -> float | None:
        d = self.of(name, **labels)
        return None if d is None else d / self.dt

    def ratio(self, num: str, den: str) -> float | None:
        n, d = self.of(num), self.of(den)
        return n / d if n is not None and d else None

    def hist_mean_ms(self, name: str) -> float | None:
        r = self.ratio(f"{name}_sum", f"{name}_count")
        return None if r is None else 1000.0 * r


def _set(out: dict, key: str, value, source: str) -> bool:
    if value is None or out[key] is not None:
        return False
    out[key] = value
    out["sources"][key] = source
    return True


def _latencies(d: _Delta, out: dict, prefix: str, itl_names: tuple[str, ...]):
    for key, names in (
        ("ttft_ms_mean", ("time_to_first_token_seconds",)),
        ("itl_ms_mean", itl_names),
        ("e2e_ms_mean", ("e2e_request_latency_seconds",)),
    ):
        for n in names:
            _set(out, key, d.hist_mean_ms(prefix + n), f"Δ{prefix}{n}_sum / Δ_count")


def _spec_counters(d: _Delta, out: dict, prefix: str):
    acc, drafts, toks = (
        f"{prefix}spec_decode_num_accepted_tokens_total",
        f"{prefix}spec_decode_num_drafts_total",
        f"{prefix}spec_decode_num_draft_tokens_total",
    )
    per_draft = d.ratio(acc, drafts)
    if per_draft is not None:
        _set(out, "accept_len", 1.0 + per_draft, f"1 + Δ{acc} / Δ{drafts}")
    _set(out, "accept_rate", d.ratio(acc, toks), f"Δ{acc} / Δ{toks}")


def _vllm(d: _Delta, out: dict):
    _set(out, "gen_tok_s", d.rate("vllm:generation_tokens_total"), "rate(vllm:generation_tokens_total)")
    _spec_counters(d, out, "vllm:")
    _set(out, "running_reqs", d.cur.total("vllm:num_requests_running"), "vllm:num_requests_running")
    # inter_token_latency replaced the deprecated time_per_output_token histogram
    _latencies(d, out, "vllm:", ("inter_token_latency_seconds", "time_per_output_token_seconds"))


def _sglang(d: _Delta, out: dict):
    name = "sglang:realtime_tokens_total"
    _set(out, "gen_tok_s", d.rate(name, mode="decode"), f'rate({name}{{mode="decode"}})')
    # only attention-TP rank 0 of each DP group updates the scheduler gauges by default
    gauge = d.cur.total("sglang:gen_throughput", tp_rank="0")
    if gauge is None:
        gauge = d.cur.total("sglang:gen_throughput")
    _set(out, "gen_tok_s", gauge, "sglang:gen_throughput (gauge, last log window)")
    # counted when a request finishes, so it jumps: the last resort
    name = "sglang:generation_tokens_total"
    _set(out, "gen_tok_s", d.rate(name), f"rate({name}) (steps at request completion)")
    accept = d.cur.mean("sglang:spec_accept_length")
    if accept:  # 0 when speculation is off
        _set(out, "accept_len", accept, "sglang:spec_accept_length (gauge, last log window)")
        rate = d.cur.mean("sglang:spec_accept_rate")
        _set(out, "accept_rate", rate, "sglang:spec_accept_rate (gauge; definition varies by version)")
    _set(out, "running_reqs", d.cur.total("sglang:num_running_reqs"), "sglang:num_running_reqs")
    _latencies(d, out, "sglang:", ("inter_token_latency_seconds",))


def _llamacpp(d: _Delta, out: dict):
    name = "llamacpp:tokens_predicted_total"
    _set(out, "gen_tok_s", d.rate(name), f"rate({name})")
    busy = d.ratio(name, "llamacpp:tokens_predicted_seconds_total")
    out["decode_tok_s_per_slot"] = busy  # tokens per second of slot busy time
    if busy is not None:
        out["sources"]["decode_tok_s_per_slot"] = f"Δ{name} / Δllamacpp:tokens_predicted_seconds_total"
    _spec_counters(d, out, "llamacpp:")
    _set(out, "running_reqs", d.cur.total("llamacpp:requests_processing"), "llamacpp:requests_processing")


def _trtllm(d: _Delta, out: dict):
    if any(s.name.startswith("trtllm:") for s in d.cur.series):
        _trtllm_iterations(d, out)
    else:
        _trtllm_prometheus(d, out)


def _trtllm_iterations(d: _Delta, out: dict):
    # the page holds the iterations since the previous scrape: its sums are the interval's
    tokens, reqs = d.cur.total("trtllm:generated_tokens"), d.cur.total("trtllm:numGenRequests")
    if tokens is not None:
        _set(out, "gen_tok_s", tokens / d.dt, "Σ trtllm:generated_tokens (iterations on the page) / interval")
    if tokens is not None and reqs:
        _set(out, "accept_len", tokens / reqs, "Σ trtllm:generated_tokens / Σ trtllm:numGenRequests")
    active = [s.value for s in d.cur.series if s.name == "trtllm:numActiveRequests"]
    if active:
        _set(out, "running_reqs", active[-1], "trtllm:numActiveRequests (last iteration on the page)")
    step = d.cur.mean("trtllm:decode_step_ms")
    out["decode_round_ms"] = step  # ms per generation-only iteration: the decode round
    if step is not None:
        out["sources"]["decode_round_ms"] = "mean trtllm:decode_step_ms (generation-only iterations)"


def _trtllm_prometheus(d: _Delta, out: dict):
    # generation tokens are counted as each request finishes (log_request_metrics_dict): the rate steps
    name = "trtllm_generation_tokens_total"
    _set(out, "gen_tok_s", d.rate(name), f"rate({name}) (steps at request completion)")
    accept = d.cur.mean("trtllm_spec_decode_acceptance_length")
    if accept:  # 0 until an iteration drafts
        _set(out, "accept_len", accept, "trtllm_spec_decode_acceptance_length (gauge, last iteration)")
    acc, drafts = "trtllm_spec_decode_num_accepted_tokens_total", "trtllm_spec_decode_num_draft_tokens_total"
    _set(out, "accept_rate", d.ratio(acc, drafts), f"Δ{acc} / Δ{drafts}")
    _set(out, "running_reqs", d.cur.total("trtllm_num_requests_running"), "trtllm_num_requests_running")
    _latencies(d, out, "trtllm_", ("time_per_output_token_seconds",))


_RULES = {"vllm": _vllm, "sglang": _sglang, "llamacpp": _llamacpp, "trtllm": _trtllm}
