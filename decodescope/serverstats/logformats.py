"""The server log line formats decodescope reads: SGLang, vLLM, llama.cpp and TensorRT-LLM.

Each parser takes one line and returns a `Parsed` tuple, or None when the line is not
one of its statistics lines. Formats, every known version, come from
the engines' own source: SGLang python/sglang/srt/managers/scheduler_metrics_mixin.py (https://github.com/sgl-project/sglang), vLLM vllm/v1/metrics/loggers.py (https://github.com/vllm-project/vllm), llama.cpp tools/server/server.cpp (https://github.com/ggml-org/llama.cpp), TensorRT-LLM's
iteration line in trtllm_log.py. Strategy:
find a fixed marker with a substring test (cheap, so a 1 GB log of noise costs little),
strip the engine's prefix with a small regex, then split the message into `key: value`
pairs and keep every key as the engine prints it, because the field set has changed
many times and will change again."""

import re

from decodescope.serverstats.llamacpp_log import llamacpp_pid, parse_llamacpp, uncoloured
from decodescope.serverstats.trtllm_log import parse_trtllm
from decodescope.serverstats.logvalues import (
    MAX_ACCEPT,
    MAX_RUNNING,
    MAX_TOK_S,
    MIN_TOK_S,
    Parsed,
    Rejected,
    checked,
    count,
    is_num,
    local_epoch,
    number,
    pairs,
)

__all__ = ["ENGINES", "RUNNING_KEYS", "Parsed", "Rejected", "STARTUP_MARKERS", "checked", "number", "pairs",
           "parse_llamacpp", "parse_sglang", "parse_startup", "parse_trtllm", "parse_vllm", "running_in",
           "sglang_facts"]


# ---------------------------------------------------------------- SGLang

# "[2026-05-12 00:05:35 TP0] ", "[... .123 DP1 TP4] "; ranks also PP/EP/ATTN_CP/MOE_DP
_SGL_PREFIX = re.compile(
    r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.(\d{3}))?((?: [A-Z_]+\d+)*)\] $|\[(gpu_id=\d+)\] $"
)
# a logging config of one's own: "2025-12-04 20:35:53 INFO 151972 [file.py:287] Decode batch. ..."
# (fastrl); its two empty groups stand for _SGL_PREFIX's rank groups, so both read alike
_SGL_LEAD = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:[.,](\d{3}))? [A-Z]+ ()()")
_SGL_MARKERS = (("Decode batch", "decode"), ("Prefill batch", "prefill"))


def parse_sglang(line: str) -> Parsed | None:
    for marker, kind in _SGL_MARKERS:  # noqa: B007 (kind is used after the break)
        at = line.find(marker)
        if at >= 0:
            break
    else:
        return None
    rest = line[at + len(marker) :]
    fields = {}
    if rest.startswith(" ["):  # "Decode batch [1234], " with SGLANG_LOG_FORWARD_ITERS
        end = rest.find("]")
        fields["forward_ct"] = number(rest[2:end])
        rest = rest[end + 1 :]
    if not rest.startswith((", ", ". ")):
        return None
    fields.update(pairs(rest[2:]))
    # type() in _NUMBER is is_num() for what pairs() returns (int, float, bool, str), quicker
    gen = fields.get("gen throughput (token/s)")
    if type(gen) not in _NUMBER:
        if kind == "decode":
            return None
        gen = None
    accept = fields.get("accept len") if kind == "decode" else None
    if type(accept) not in _NUMBER:
        accept = None
    running = fields.get("#running-req")
    checked(running if type(running) in _NUMBER else None, accept, gen)
    m = _SGL_PREFIX.search(line, 0, at) or _SGL_LEAD.match(line)
    return Parsed(kind, _sglang_time(m), _sglang_rank(m), fields, accept, gen)


_NUMBER = (int, float)


def sglang_facts(line: str) -> tuple | None:
    """(kind, rank, #running-req, accept_len, gen_tok_s, time_s) of an SGLang line,
    reading only those fields: a summary of a 1 GB log cannot afford to split every
    field of every line. Whenever a value does not read cleanly it asks parse_sglang,
    so the two agree (Rejected included)."""
    at = line.find("Decode batch")
    kind = "decode"
    if at < 0:
        at = line.find("Prefill batch")
        if at < 0:
            return None
        kind = "prefill"
    body = at + (12 if kind == "decode" else 13)
    if line[body : body + 2] not in (", ", ". "):
        return _facts(parse_sglang(line))
    # the same pieces pairs() sees: a key starts a piece, its value runs to the next ', '
    running = accept = gen = None
    try:
        i = _piece(line, "#running-req: ", body)
        if i >= 0:
            j = line.find(", ", i)
            running = int(line[i:j] if j >= 0 else line[i:])
        i = _piece(line, "gen throughput (token/s): ", body)
        if i >= 0:
            j = line.find(", ", i)
            gen = float(line[i:j] if j >= 0 else line[i:])
        elif kind == "decode":
            return None
        if kind == "decode":
            i = _piece(line, "accept len: ", body)
            if i >= 0:
                j = line.find(", ", i)
                accept = float(line[i:j] if j >= 0 else line[i:])
    except ValueError:
        return _facts(parse_sglang(line))
    if not ((gen is None or gen == 0.0 or MIN_TOK_S <= gen <= MAX_TOK_S) and (running is None or 0 <= running <= MAX_RUNNING)
            and (accept is None or 1.0 <= accept <= MAX_ACCEPT)):
        return _facts(parse_sglang(line))  # raises Rejected, or reads what the full parser reads
    m = _SGL_PREFIX.search(line, 0, at) or _SGL_LEAD.match(line)
    return kind, _sglang_rank(m), running, accept, gen, _sglang_time(m)


def _piece(line: str, key: str, body: int) -> int:
    """Where the value of the last piece starting with `key` begins, or -1. Pieces
    follow ', ' or the 2-character separator at `body`, after the marker."""
    i = line.rfind(", " + key, body)
    if i >= 0:
        return i + 2 + len(key)
    return body + 2 + len(key) if line.startswith(key, body + 2) else -1


def _facts(p: Parsed | None) -> tuple | None:
    if p is None:
        return None
    running = p.fields.get("#running-req")
    return p.kind, p.rank, running if is_num(running) else None, p.accept_len, p.gen_tok_s, p.time_s


def _sglang_rank(m: re.Match | None) -> str | None:
    if m is None:
        return None
    return m.group(4) or m.group(3).strip() or None  # v0.1-0.2: "[gpu_id=0] Decode batch. ..."


def sglang_stamp(line: str, at: int) -> tuple:
    """(time_s, rank) of an SGLang line whose message starts at `at` (as parse_sglang reads them)."""
    m = _SGL_PREFIX.search(line, 0, at)
    return _sglang_time(m), _sglang_rank(m)


_last_stamp = ["", None]  # consecutive lines mostly share their second


def _sglang_time(m: re.Match | None) -> float | None:
    if m is None:
        return None
    stamp, ms = m.group(1, 2)
    if stamp is None:
        return None
    if stamp == _last_stamp[0]:
        t = _last_stamp[1]
    else:
        t = local_epoch(stamp)
        _last_stamp[:] = stamp, t
    if t is not None and ms:
        t += int(ms) / 1000
    return t


# ---------------------------------------------------------------- vLLM

# "(APIServer pid=1) INFO 05-04 01:06:53 [loggers.py:271] " (current) and
# "INFO 05-04 01:06:53 metrics.py:341] " (2024); the date has no year.
_VLLM_PREFIX = re.compile(
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[?[\w.-]+:\d+\] "
)
_VLLM_ENGINE = re.compile(r"(Engine \d+|\d+ Engines Aggregated): $")
# also "(APIServer_DP1 pid=N)" (one API server per DP rank, external load balancing) and
# behind `docker logs --timestamps`' "2026-05-12T08:01:39.331095044Z "
_VLLM_PID = re.compile(r"^(?:\d{4}-\d\d-\d\dT[\d:.]+Z )?\((?:APIServer|ApiServer_\d+|APIServer_DP\d+) pid=(\d+)\) ")


def parse_vllm(line: str, year: int) -> Parsed | None:
    if "\x1b" in line:  # a terminal's log: level, stamp and [file:line] coloured
        line = uncoloured(line)
    at = line.find("Avg prompt throughput: ")
    if at >= 0:
        fields = pairs(line[at:])
        gen = fields.get("Avg generation throughput")
        if not is_num(gen):
            return None
        running = fields.get("Running")
        checked(running if is_num(running) else None, None, gen)
        head = line[:at]
        m = _VLLM_ENGINE.search(head)
        rank = m.group(1) if m else None
        return Parsed("stats", _vllm_time(head, year), rank, fields, None, float(gen), _vllm_pid(line))
    for marker in ("SpecDecoding metrics: ", "Speculative metrics: "):
        at = line.find(marker)
        if at >= 0:
            fields = pairs(line[at + len(marker) :], lists=True)
            accept = _vllm_accept_len(fields)
            checked(None, accept, None)
            return Parsed("spec", _vllm_time(line[:at], year), None, fields, accept, None, _vllm_pid(line))
    return None


def _vllm_pid(line: str) -> str | None:
    m = _VLLM_PID.match(line)
    return m.group(1) if m else None


def _vllm_time(head: str, year: int) -> float | None:
    m = _VLLM_PREFIX.search(head)
    return local_epoch(f"{year}-{m.group(1)}") if m else None


def _vllm_accept_len(fields: dict) -> float | None:
    mean = fields.get("Mean acceptance length")  # V1 since PR #16665: 1 + accepted/drafts
    if is_num(mean):
        return float(mean)
    # V0 "Speculative metrics": emitted tokens (bonus included) per verify step, where
    # steps = draft tokens / k. Its counters are lifetime totals (secondhand), so this is
    # a lifetime mean. The April-2025 V1 form has no draft count: no accept length.
    emitted = fields.get("Number of emitted tokens")
    drafts = fields.get("Number of draft tokens")
    k = fields.get("Number of speculative tokens")
    if all(is_num(x) for x in (emitted, drafts, k)) and count(drafts) > 0:
        return count(emitted) * count(k) / drafts
    return None


# ---------------------------------------------------------------- server start-up

# One line each engine writes once as a server starts, and what it says about
# speculative decoding: SGLang logs its ServerArgs (speculative_algorithm=None or 'EAGLE'),
# vLLM its version and then the engine config (speculative_config=None or SpeculativeConfig(...)),
# llama-server the address it listens on, TensorRT-LLM its version (saying nothing of speculation).
STARTUP_MARKERS = {
    "sglang": ("server_args=ServerArgs(",),
    "vllm": ("vLLM API server version", "Initializing a V1 LLM engine", "Initializing an LLM engine", "Starting vLLM"),
    "llamacpp": ("server is listening on",),
    "trtllm": ("[TensorRT-LLM] TensorRT-LLM version: ",),  # printed as tensorrt_llm is imported
}
_SPEC_SETTING = re.compile(r"(speculative_algorithm|speculative_config)=(None|\S)")


def parse_startup(line: str, engine: str) -> Parsed | None:
    """A start-up line of `engine`, kind "startup", fields {"speculative": True / False /
    None (not said)}; None for any other line."""
    for marker in STARTUP_MARKERS[engine]:
        if marker in line:
            break
    else:
        return None
    m = _SPEC_SETTING.search(line)
    fields = {"speculative": None if m is None else m.group(2) != "None"}
    time_s = None
    if engine == "sglang":
        time_s = _sglang_time(_SGL_PREFIX.search(line, 0, line.find(marker)))
    process = _vllm_pid(line) if engine == "vllm" else llamacpp_pid(line) if engine == "llamacpp" else None
    return Parsed("startup", time_s, None, fields, None, None, process)


ENGINES = ("sglang", "vllm", "llamacpp", "trtllm")

# where each engine's line says how many requests are in flight: SGLang, vLLM, TensorRT-LLM's
# iteration line and its IterationStats JSON (scheduled requests: all generating, in a
# generation-only iteration)
RUNNING_KEYS = ("#running-req", "Running", "num_scheduled_requests", "numScheduledRequests")


def running_in(fields: dict):
    """The requests-in-flight value of a line's fields (the first of RUNNING_KEYS it has)."""
    for key in RUNNING_KEYS:
        if key in fields:
            return fields[key]
    return None
