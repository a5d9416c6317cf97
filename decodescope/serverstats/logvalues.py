"""The values of server log lines: numbers read as the engines print them, the
ranges a statistic must fall in, and the parsed form of a line (Parsed)."""

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
    """(running, accept, gen) when each is absent or in range, else Rejected: running a
    whole number 0..MAX_RUNNING, accept 1..MAX_ACCEPT, gen 0..MAX_TOK_S, all finite."""
    if running is not None and not (0 <= running <= MAX_RUNNING and running % 1 == 0):  # a whole count
        raise Rejected(f"#running {running!r:.40}")
    if accept is not None and not 1.0 <= accept <= MAX_ACCEPT:
        raise Rejected(f"accept len {accept!r:.40}")
    if gen is not None and not (gen == 0.0 or MIN_TOK_S <= gen <= MAX_TOK_S):
        raise Rejected(f"gen tok/s {gen!r:.40}")
    return running, accept, gen


def count(v):
    """A token count from a log line, or Rejected."""
    if not (is_num(v) and 0 <= v <= MAX_COUNT):
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
    if not lists:  # the common case, in one comprehension; a cached value is reused
        seen = _seen
        return {k: seen[v] for k, sep, v in [part.partition(": ") for part in text.split(", ")] if sep}
    fields = {}
    key = None
    for part in text.split(", "):
        k, sep, v = part.partition(": ")
        if sep:
            key = k
            fields[key] = _seen[v]
        elif key is not None and part.strip():
            prev = fields[key]
            fields[key] = (prev if isinstance(prev, list) else [prev]) + [number(part)]
    return fields


class BoundedCache(dict):
    """fn(key) for each key, computed once and kept; cleared when it holds `size` keys, so a
    long log cannot grow it. A hit is a plain dict lookup (no Python call)."""

    def __init__(self, fn, size: int = 20_000):
        super().__init__()
        self.fn, self.size = fn, size

    def __missing__(self, key):
        x = self.fn(key)
        if len(self) >= self.size:
            self.clear()
        self[key] = x
        return x


def value(v: str):
    """The value of a `key: value` piece as pairs() reads it: a bare number quickly,
    number() for units, %, bools and text."""
    if v[-1:].isdigit():
        try:
            return float(v) if "." in v else int(v)
        except ValueError:
            pass
    return number(v)


def _hour(hour: str) -> float:
    return time.mktime(time.strptime(hour, "%Y-%m-%d %H"))


# values repeat line after line ("0.12", "True", "10"): value text -> value(text), a few MB at most
_seen = BoundedCache(value)
_hour_epoch = BoundedCache(_hour, 100_000)  # 'YYYY-mm-dd HH' -> epoch seconds


def local_epoch(stamp: str) -> float | None:
    """Epoch seconds of a local-time 'YYYY-mm-dd HH:MM:SS'. One mktime per hour of log:
    daylight-saving changes fall on the hour, so minutes and seconds simply add."""
    try:
        return _hour_epoch[stamp[:13]] + int(stamp[14:16]) * 60 + int(stamp[17:19])
    except (ValueError, OverflowError):
        return None


def is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
