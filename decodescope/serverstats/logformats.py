"""The server log line formats decodescope reads: SGLang, vLLM and llama.cpp.

Each parser takes one line and returns a `Parsed` tuple, or None when the line is not
one of its statistics lines. Formats, every known version, are quoted in
shared/reference/serving-logs-and-benchmarks.md (sections 1-3). Strategy (its section 7):
find a fixed marker with a substring test (cheap, so a 1 GB log of noise costs little),
strip the engine's prefix with a small regex, then split the message into `key: value`
pairs and keep every key as the engine prints it, because the field set has changed
many times and will change again."""

import math
import re
import time
from typing import NamedTuple

# Plausible ranges of the figures a summary uses; a line whose figure falls outside is
# rejected (counted, never summed): a rate beyond any GPU, a count beyond any batch.
MAX_TOK_S = 1e8  # generated tokens / s over a window
MIN_TOK_S = 1e-6  # a rate above 0 but below this is a denormal, not a measurement
MAX_RUNNING = 10_000_000  # requests in flight
MAX_ACCEPT = 1000.0  # tokens per verify round (1 = no draft token accepted)
MAX_COUNT = 10**15  # token counters (lifetime totals included)


class Rejected(ValueError):
    """A statistics line whose figure is not finite or out of range."""


class Parsed(NamedTuple):
    kind: str  # "decode" | "prefill" | "spec" | "stats" | "startup"
    time_s: float | None  # epoch seconds (local time, as the server's logger wrote it)
    rank: str | None
    fields: dict
    accept_len: float | None  # tokens per verify round incl. the bonus token
    gen_tok_s: float | None  # generated tokens per second over the line's window, all requests
    process: str | None = None  # the server process that wrote the line (vLLM pid=, llama.cpp [pid])


def checked(running, accept, gen):
    """(running, accept, gen) when each is absent or in range, else Rejected: running
    0..MAX_RUNNING, accept 1..MAX_ACCEPT, gen 0..MAX_TOK_S, all finite."""
    if running is not None and not 0 <= running <= MAX_RUNNING:
        raise Rejected(f"#running {running!r:.40}")
    if accept is not None and not 1.0 <= accept <= MAX_ACCEPT:
        raise Rejected(f"accept len {accept!r:.40}")
    if gen is not None and not (gen == 0.0 or MIN_TOK_S <= gen <= MAX_TOK_S):
        raise Rejected(f"gen tok/s {gen!r:.40}")
    return running, accept, gen


def _count(v):
    """A token count from a log line, or Rejected."""
    if not (_is_num(v) and 0 <= v <= MAX_COUNT):
        raise Rejected(f"count {v!r:.40}")
    return v


# ---------------------------------------------------------------- values and pairs


def number(text: str):
    """'0.00' -> 0.0, '4 reqs' -> 4, '1.2%' -> 1.2, 'True' -> True; anything else stays text.
    Units after the number are dropped: the key says what the value is."""
    word = text.strip().split(" ", 1)[0].rstrip("%.,")
    if word == "True" or word == "False":
        return word == "True"
    for kind in (int, float):
        try:
            return kind(word)
        except ValueError:
            pass
    return text.strip()


def pairs(text: str, lists: bool = False) -> dict:
    """'a: 1, b: 2.5' -> {'a': 1, 'b': 2.5}: pieces split at ', ', key before the first
    ': ', the last piece of a key wins. A piece without ': ' is dropped, or with `lists`
    continues the previous value: 'c: 0.8, 0.6' -> {'c': [0.8, 0.6]} (vLLM's
    per-position rates are a comma-separated list inside a comma-separated line)."""
    fields = {}
    key = None
    for part in text.split(", "):
        k, sep, v = part.partition(": ")
        if sep:
            key = k
            # fast path for a bare number, most values; number() for units, %, bools
            if v[-1:].isdigit():
                try:
                    fields[key] = float(v) if "." in v else int(v)
                    continue
                except ValueError:
                    pass
            fields[key] = number(v)
        elif lists and key is not None and part.strip():
            prev = fields[key]
            fields[key] = (prev if isinstance(prev, list) else [prev]) + [number(part)]
    return fields


_hour_epoch: dict[str, float] = {}


def local_epoch(stamp: str) -> float | None:
    """Epoch seconds of a local-time 'YYYY-mm-dd HH:MM:SS'. One mktime per hour of log:
    daylight-saving changes fall on the hour, so minutes and seconds simply add."""
    hour = stamp[:13]
    base = _hour_epoch.get(hour)
    try:
        if base is None:
            base = time.mktime(time.strptime(hour, "%Y-%m-%d %H"))
            if len(_hour_epoch) > 100_000:
                _hour_epoch.clear()
            _hour_epoch[hour] = base
        return base + int(stamp[14:16]) * 60 + int(stamp[17:19])
    except (ValueError, OverflowError):
        return None


# ---------------------------------------------------------------- SGLang

# "[2026-05-12 00:05:35 TP0] ", "[... .123 DP1 TP4] "; ranks also PP/EP/ATTN_CP/MOE_DP
_SGL_PREFIX = re.compile(
    r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?:\.(\d{3}))?((?: [A-Z_]+\d+)*)\] $|\[(gpu_id=\d+)\] $"
)
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
    gen = fields.get("gen throughput (token/s)")
    gen = gen if _is_num(gen) else None
    if kind == "decode" and gen is None:
        return None
    accept = fields.get("accept len") if kind == "decode" else None
    running = fields.get("#running-req")
    checked(running if _is_num(running) else None, accept if _is_num(accept) else None, gen)
    m = _SGL_PREFIX.search(line, 0, at)
    return Parsed(kind, _sglang_time(m), _sglang_rank(m), fields, accept if _is_num(accept) else None, gen)


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
    m = _SGL_PREFIX.search(line, 0, at)
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
    return p.kind, p.rank, running if _is_num(running) else None, p.accept_len, p.gen_tok_s, p.time_s


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _sglang_rank(m: re.Match | None) -> str | None:
    if m is None:
        return None
    return m.group(4) or m.group(3).strip() or None  # v0.1-0.2: "[gpu_id=0] Decode batch. ..."


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
_VLLM_PID = re.compile(r"^\((?:APIServer|ApiServer_\d+) pid=(\d+)\) ")


def parse_vllm(line: str, year: int) -> Parsed | None:
    at = line.find("Avg prompt throughput: ")
    if at >= 0:
        fields = pairs(line[at:])
        gen = fields.get("Avg generation throughput")
        if not _is_num(gen):
            return None
        running = fields.get("Running")
        checked(running if _is_num(running) else None, None, gen)
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
    if _is_num(mean):
        return float(mean)
    # V0 "Speculative metrics": emitted tokens (bonus included) per verify step, where
    # steps = draft tokens / k. Its counters are lifetime totals (secondhand), so this is
    # a lifetime mean. The April-2025 V1 form has no draft count: no accept length.
    emitted = fields.get("Number of emitted tokens")
    drafts = fields.get("Number of draft tokens")
    k = fields.get("Number of speculative tokens")
    if all(_is_num(x) for x in (emitted, drafts, k)) and _count(drafts) > 0:
        return _count(emitted) * _count(k) / drafts
    return None


# ---------------------------------------------------------------- llama.cpp

# "slot print_timing: id  0 | task 0 | " (since late 2024); before that
# "INFO [           print_timings] ... | tid=... timestamp=1717000000 id_slot=0 id_task=0 ..."
_NUM = r"(-?(?:\d+(?:\.\d*)?|nan|inf))"  # printf %f; a 0 ms phase prints "inf tokens per second"
_LCPP_SLOT = re.compile(r"slot +\S+: +id +(\d+) \| task (-?\d+) \| ")
_LCPP_OLD_TAIL = re.compile(r"timestamp=(\d+)|id_slot=(\d+)|id_task=(-?\d+)")
_LCPP_ELAPSED = re.compile(r"^(\d+)\.(\d\d)\.(\d{3})\.(\d{3}) [IWEDT] ")  # --log-timestamps
# "prompt eval time = 1234.56 ms /   512 tokens (    2.41 ms per token,   414.83 tokens per second)"
# also "generation eval time = ... / N runs   (...)" (2024) and "total time = ... ms / N tokens"
_LCPP_TIMING = re.compile(
    rf"(prompt eval|generation eval|eval|total) time\s*=\s*{_NUM} ms"
    r"(?:\s*/\s*(\d+) (?:tokens|runs))?"
    rf"(?:\s*\(\s*{_NUM} ms per token,\s*{_NUM} tokens per second\))?"
)
# "draft acceptance = 0.63158 (   24 accepted /    38 generated), mean len =  2.85";
# oldest "draft acceptance rate = ..." without the mean; one variant spells
# "mean acceptance length = ..., acceptance rate per position = (0.9, 0.7)"
_LCPP_DRAFT = re.compile(
    rf"draft acceptance(?: rate)? = {_NUM} \(\s*(\d+) accepted /\s*(\d+) generated\)"
    rf"(?:, mean (?:len|acceptance length) =\s*{_NUM})?"
    r"(?:, acceptance rate per position = \(([^)]*)\))?"
)
_LCPP_PROGRESS = re.compile(rf"n_gen = (\d+), tg = {_NUM} t/s(?:, tg_3s = {_NUM} t/s)?")
# "statistics draft-mtp: #calls(b,g,a) = 10 727 727, #gen drafts = 727, #acc drafts = 632,
# #gen tokens = 1447, #acc tokens = 1135[, #mean acc len = 2.92], dur(b,g,a) = ..." (2026):
# counters since the server started, per drafting method
_LCPP_STATS = re.compile(
    r"statistics +([\w.-]+): .*?#gen drafts = +(\d+), #acc drafts = +(\d+), "
    rf"#gen tokens = +(\d+), #acc tokens = +(\d+)(?:, #mean acc len = {_NUM})?"
)
_LCPP_PID = re.compile(r"^\[(\d+)\] ")  # "[53409] " before every line of one server process


def parse_llamacpp(line: str) -> Parsed | None:
    if "time =" in line:
        m = _LCPP_TIMING.search(line)
        return _llamacpp_timing(line, m) if m else None
    if "draft acceptance" in line:
        m = _LCPP_DRAFT.search(line)
        return _llamacpp_draft(line, m) if m else None
    if "n_gen = " in line:
        m = _LCPP_PROGRESS.search(line)
        return _llamacpp_progress(line, m) if m else None
    if "statistics " in line:
        m = _LCPP_STATS.search(line)
        return _llamacpp_stats(line, m) if m else None
    return None


def _llamacpp_timing(line: str, m: re.Match) -> Parsed:
    what, ms, n, ms_per_tok, tok_s = m.groups()
    fields = {"time_ms": float(ms)}
    if n is not None:
        fields["tokens"] = _count(int(n))
    if tok_s is not None:
        fields["ms_per_token"] = float(ms_per_tok)
        fields["tokens_per_second"] = float(tok_s)
    time_s, rank = _llamacpp_prefix(line, fields)
    process = _llamacpp_pid(line)
    if what == "prompt eval":
        return Parsed("prefill", time_s, rank, fields, None, None, process)
    if what == "total":
        return Parsed("stats", time_s, rank, fields, None, None, process)
    gen = float(tok_s) if tok_s is not None else None
    if gen is not None and not math.isfinite(gen):
        gen = None  # llama.cpp prints inf / nan for a 0 ms phase: no rate, not an error
    return Parsed("decode", time_s, rank, fields, None, checked(None, None, gen)[2], process)


def _llamacpp_draft(line: str, m: re.Match) -> Parsed:
    ratio, accepted, drafted, mean, per_pos = m.groups()
    fields = {"draft_acceptance": float(ratio), "accepted": _count(int(accepted)), "generated": _count(int(drafted))}
    accept = None
    if mean is not None:  # 1 + accepted / verify steps
        accept = fields["mean_len"] = float(mean)
    if per_pos:
        fields["acceptance_rate_per_position"] = [number(x) for x in per_pos.split(",")]
    time_s, rank = _llamacpp_prefix(line, fields)
    return Parsed("spec", time_s, rank, fields, checked(None, accept, None)[1], None, _llamacpp_pid(line))


def _llamacpp_stats(line: str, m: re.Match) -> Parsed:
    name, gen_drafts, acc_drafts, gen_tokens, acc_tokens, mean = m.groups()
    fields = {"method": name, "gen_drafts": _count(int(gen_drafts)), "acc_drafts": _count(int(acc_drafts)),
              "gen_tokens": _count(int(gen_tokens)), "acc_tokens": _count(int(acc_tokens))}
    accept = None
    if mean is not None and fields["gen_drafts"] > 0:
        accept = fields["mean_acc_len"] = float(mean)
    time_s, rank = _llamacpp_prefix(line, fields)
    return Parsed("spec", time_s, rank, fields, checked(None, accept, None)[1], None, _llamacpp_pid(line))


def _llamacpp_pid(line: str) -> str | None:
    if line[:1] != "[":
        return None
    m = _LCPP_PID.match(line)
    return m.group(1) if m else None


def _llamacpp_progress(line: str, m: re.Match) -> Parsed:
    # periodic during long generations; tg = whole request so far, tg_3s = last 3 s.
    # Kept as "stats" so it is not counted twice with the request's final eval line.
    n_gen, tg, tg_3s = m.groups()
    fields = {"n_gen": int(n_gen), "tg": float(tg)}
    if tg_3s is not None:
        fields["tg_3s"] = float(tg_3s)
    time_s, rank = _llamacpp_prefix(line, fields)
    return Parsed("stats", time_s, rank, fields, None, None)


def _llamacpp_prefix(line: str, fields: dict) -> tuple[float | None, str | None]:
    time_s = rank = None
    m = _LCPP_SLOT.search(line)
    if m:
        rank = f"slot {m.group(1)}"
        fields["task"] = int(m.group(2))
    elif " | " in line:  # 2024 LOG_INFO form: key=value tail
        for stamp, slot, task in _LCPP_OLD_TAIL.findall(line.rsplit(" | ", 1)[1]):
            if stamp:
                time_s = float(stamp)
            if slot:
                rank = f"slot {slot}"
            if task:
                fields["task"] = int(task)
    e = _LCPP_ELAPSED.match(line, line.find("] ") + 2 if line[:1] == "[" else 0)
    if e:  # elapsed since server start, not wall clock
        mm, ss, ms, us = (int(x) for x in e.groups())
        fields["log_elapsed_s"] = mm * 60 + ss + ms / 1e3 + us / 1e6
    return time_s, rank


# ---------------------------------------------------------------- server start-up

# One line each engine writes once as a server starts, and what it says about
# speculative decoding: SGLang logs its ServerArgs (speculative_algorithm=None or 'EAGLE'),
# vLLM its version and then the engine config (speculative_config=None or SpeculativeConfig(...)),
# llama-server the address it listens on.
STARTUP_MARKERS = {
    "sglang": ("server_args=ServerArgs(",),
    "vllm": ("vLLM API server version", "Initializing a V1 LLM engine", "Initializing an LLM engine", "Starting vLLM"),
    "llamacpp": ("server is listening on",),
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
    process = _vllm_pid(line) if engine == "vllm" else _llamacpp_pid(line) if engine == "llamacpp" else None
    return Parsed("startup", time_s, None, fields, None, None, process)


ENGINES = ("sglang", "vllm", "llamacpp")
