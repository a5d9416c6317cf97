"""llama.cpp server log lines: per-request timing, draft acceptance, progress and
draft "statistics" lines, every known version."""

import math
import re

from decodescope.serverstats.logvalues import Parsed, checked, count, number


# ---------------------------------------------------------------- llama.cpp

# "slot print_timing: id  0 | task 0 | " (since late 2024); before that
# "INFO [           print_timings] ... | tid=... timestamp=1717000000 id_slot=0 id_task=0 ..."
_NUM = r"(-?(?:\d+(?:\.\d*)?|nan|inf))"  # printf %f; a 0 ms phase prints "inf tokens per second"
_LCPP_SLOT = re.compile(r"slot +\S+: +id +(\d+) \| task (-?\d+) \| ")
_LCPP_OLD_TAIL = re.compile(r"timestamp=(\d+)|id_slot=(\d+)|id_task=(-?\d+)")
# the same keys in 2024's --log-format json: {"tid":"1","timestamp":1717067386,...,"id_slot":0,"id_task":19,...}
_LCPP_JSON_KEYS = re.compile(r'"timestamp":(\d+)|"id_slot":(\d+)|"id_task":(-?\d+)')
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
# "n_gen = 100, tg = 19.04 t/s, tg_3s = 19.23 t/s"; until 2026 "n_decoded = 1546, ..."
_LCPP_PROGRESS = re.compile(rf"(n_gen|n_decoded) = +(\d+), tg = +{_NUM} t/s(?:, tg_3s = +{_NUM} t/s)?")
# "statistics draft-mtp: #calls(b,g,a) = 10 727 727, #gen drafts = 727, #acc drafts = 632,
# #gen tokens = 1447, #acc tokens = 1135[, #mean acc len = 2.92], dur(b,g,a) = ..." (2026):
# counters since the server started, per drafting method
_LCPP_STATS = re.compile(
    r"statistics +([\w.-]+): .*?#gen drafts = +(\d+), #acc drafts = +(\d+), "
    rf"#gen tokens = +(\d+), #acc tokens = +(\d+)(?:, #mean acc len = {_NUM})?"
)
_LCPP_PID = re.compile(r"^\[(\d+)\] ")  # "[53409] " before every line of one server process
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # colour (SGR) and clear-line sequences


def uncoloured(line: str) -> str:
    """`line` without its ANSI escape sequences: llama.cpp colours its prefix on a terminal
    (and in --log-file with colours on), vLLM its level, stamp and [file:line]."""
    return _ANSI.sub("", line)


def parse_llamacpp(line: str) -> Parsed | None:
    if "\x1b" in line:
        line = uncoloured(line)
    if "time " in line:  # "eval time =", 2024's padded "prompt eval time     ="
        m = _LCPP_TIMING.search(line)
        if m:
            return _llamacpp_timing(line, m)
    if "draft acceptance" in line:
        m = _LCPP_DRAFT.search(line)
        return _llamacpp_draft(line, m) if m else None
    if "n_gen = " in line or "n_decoded = " in line:
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
        fields["tokens"] = count(int(n))
    if tok_s is not None:
        fields["ms_per_token"] = float(ms_per_tok)
        fields["tokens_per_second"] = float(tok_s)
    time_s, rank = _llamacpp_prefix(line, fields)
    process = llamacpp_pid(line)
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
    fields = {"draft_acceptance": float(ratio), "accepted": count(int(accepted)), "generated": count(int(drafted))}
    accept = None
    if mean is not None:  # 1 + accepted / verify steps
        accept = fields["mean_len"] = float(mean)
    if per_pos:
        fields["acceptance_rate_per_position"] = [number(x) for x in per_pos.split(",")]
    time_s, rank = _llamacpp_prefix(line, fields)
    return Parsed("spec", time_s, rank, fields, checked(None, accept, None)[1], None, llamacpp_pid(line))


def _llamacpp_stats(line: str, m: re.Match) -> Parsed:
    name, gen_drafts, acc_drafts, gen_tokens, acc_tokens, mean = m.groups()
    fields = {"method": name, "gen_drafts": count(int(gen_drafts)), "acc_drafts": count(int(acc_drafts)),
              "gen_tokens": count(int(gen_tokens)), "acc_tokens": count(int(acc_tokens))}
    accept = None
    if mean is not None and fields["gen_drafts"] > 0:
        accept = fields["mean_acc_len"] = float(mean)
    time_s, rank = _llamacpp_prefix(line, fields)
    return Parsed("spec", time_s, rank, fields, checked(None, accept, None)[1], None, llamacpp_pid(line))


def llamacpp_pid(line: str) -> str | None:
    if line[:1] != "[":
        return None
    m = _LCPP_PID.match(line)
    return m.group(1) if m else None


def _llamacpp_progress(line: str, m: re.Match) -> Parsed:
    # periodic during long generations; tg = whole request so far, tg_3s = last 3 s.
    # Kept as "stats" so it is not counted twice with the request's final eval line.
    name, n_gen, tg, tg_3s = m.groups()
    fields = {name: int(n_gen), "tg": float(tg)}
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
    elif " | " in line or '"id_slot":' in line:  # 2024 LOG_INFO form: key=value tail, or JSON
        keys = _LCPP_JSON_KEYS.findall(line) if '"id_slot":' in line else _LCPP_OLD_TAIL.findall(line.rsplit(" | ", 1)[-1])
        for stamp, slot, task in keys:
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
