"""The shapes of SGLang statistics lines (logfused's quick path) and the patterns that
read them: one line at a time, or every line of a block in one call.

The keys of a line, and the type of each value, make its shape; a shape's pattern
matches a line only where pairs() would split it into exactly those pieces, and only
values whose text is already the JSON orjson writes for what logvalues.value reads from
it (an integer, a short decimal less its trailing zeros, True / False). So a match gives
the values, the three the summary needs are read from their text, and the record's JSON
is the shape's template filled with the matched texts."""

import re
from typing import NamedTuple

import orjson

from decodescope.serverstats import logformats
from decodescope.serverstats.logvalues import local_epoch

FACTS = ("#running-req", "accept len", "gen throughput (token/s)")  # the values the summary reads
MAX_SHAPES = 64  # SGLang line shapes learnt per kind (a log has a handful)


class Shape(NamedTuple):
    rx: re.Pattern  # the pieces "key: value" after the marker, each value of its piece's type
    # (index among the groups, int or float: what reads it as logvalues.value does), index -1 when none
    running: tuple  # of the "#running-req" value
    accept: tuple  # of "accept len" (decode lines)
    gen: tuple  # of "gen throughput (token/s)"
    template: str  # the record's JSON, %-slots: line_no, time_s, rank, accept_len, gen_tok_s, warmup, values
    keys: tuple  # the pieces' keys, in order
    types: tuple  # each piece's value type: INT, FLOAT, "True" or "False"


# The values a quick line may hold, each matched in the form orjson writes for what
# logvalues.value reads from it, so that the matched text is the value's JSON: an integer
# without leading zeros of up to 18 digits (in 64 bits, and under Python's limit on digits
# read); a decimal of up to 7 digits before the point and 7 after it, less its trailing zeros
# ("0.60" -> 0.6, "5.00" -> 5.0), at least 0.0001 (at most 14 digits: it reads back to the
# same digits, and orjson writes no exponent); True and False, matched literally (the shape
# holds which). Bounded repeats, not a look-ahead for the length: 17 % fewer instructions
# per SGLang decode line (the regex engine tests each character of a look-ahead again).
INT = r"(0|[1-9][0-9]{0,17})"
FLOAT = r"(?!0\.0000)((?:[1-9][0-9]{0,6}|0)\.(?:[0-9]{0,6}[1-9]|0))0*+"
_BOOLS = {"True": "true", "False": "false"}


def _type(text: str) -> str | None:
    """The quick type of a value's text: INT, FLOAT, "True", "False", or None (any other).
    A carriage return (the line's end) is left to the shape's pattern."""
    text = text.removesuffix("\r")
    if text in _BOOLS:
        return text
    for rx in (INT, FLOAT):
        if re.fullmatch(rx, text):
            return rx
    return None


def shape_of(kind: str, text: str, shapes: dict) -> Shape | None:
    """The shape of a line whose message after the marker is `text`, from `shapes` (keys,
    types -> shape, learnt here); None when a piece has no ': ' or a key repeats (pairs
    drops the one, keeps the last of the other: the slow path's business), or a value is
    of no quick type."""
    pieces = [p.partition(": ") for p in text.split(", ")]
    keys = tuple(k for k, _, _ in pieces)
    if any(not sep for _, sep, _ in pieces) or len(set(keys)) < len(keys):
        return None
    types = tuple(_type(v) for _, _, v in pieces)
    if (None in types or any(types[keys.index(k)] in _BOOLS for k in FACTS if k in keys)
            or (kind == "decode" and FACTS[2] not in keys)):  # a decode line without a rate is no record
        return None
    shape = shapes.get((keys, types))
    if shape is None and len(shapes) < MAX_SHAPES:
        shape = shapes[keys, types] = _shape(kind, keys, types)
    return shape


def _shape(kind: str, keys: tuple, types: tuple) -> Shape:
    """The shape of lines with these keys and value types; a line its pattern matches splits
    into exactly these pieces, as pairs splits it, and each value reads as pairs reads it."""
    groups = [k for k, t in zip(keys, types) if t not in _BOOLS]
    head = orjson.dumps({"kind": kind, "engine": "sglang"}).decode()[:-1]
    slots = ',"line_no":%d,"time_s":%s,"rank":%s,"accept_len":%s,"gen_tok_s":%s,"warmup":%s,"process":null,"fields":{'
    fields = ",".join(orjson.dumps(k).decode().replace("%", "%%") + ":" + _BOOLS.get(t, "%s") for k, t in zip(keys, types))

    def at(key):
        if key not in groups or (key == "accept len" and kind != "decode"):
            return -1, None
        return groups.index(key), int if types[keys.index(key)] == INT else float

    return Shape(
        re.compile(", ".join(re.escape(k) + ": " + (re.escape(t) if t in _BOOLS else t) for k, t in zip(keys, types))
                   + r"\r?"),
        at("#running-req"), at("accept len"), at("gen throughput (token/s)"), head.replace("%", "%%") + slots + fields + "}}",
        keys, types,
    )


# "[2026-05-12 00:05:35" and " TP0] ", ".123 DP1 TP4] ": logformats' SGLang prefix in its usual place
_MINUTE_RX = r"\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:"
_TAIL_RX = r"(?:\.[0-9]{3})?(?: [A-Z_]+\d+)*\] "
_MINUTE = re.compile(r"\[([0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}):")
_TAIL = re.compile(r"(?:\.([0-9]{3}))?((?: [A-Z_]+\d+)*)\] ")
SECONDS = {f"{i:02d}": i for i in range(100)}
NOT_THIS_FORM = object()


def minute(text: str):
    """local_epoch's sum up to the minute of '[YYYY-mm-dd HH:MM:'; None: not a date;
    NOT_THIS_FORM: not this form."""
    m = _MINUTE.fullmatch(text)
    return NOT_THIS_FORM if m is None else local_epoch(m[1] + ":00")


def tail(text: str):
    """(ms / 1000 or 0, series, rank's JSON) of what follows the seconds, or None (not this form)."""
    m = _TAIL.fullmatch(text)
    if m is None:
        return None
    rank = m[2].strip() or None
    return int(m[1]) / 1000 if m[1] else 0, ("sglang", rank), orjson.dumps(rank).decode()


def stamp(prefix: str) -> tuple:
    """(time_s, series, time_s's JSON, rank's JSON) of a prefix of any other form."""
    time_s, rank = logformats.sglang_stamp(prefix, len(prefix))
    return time_s, ("sglang", rank), orjson.dumps(time_s).decode(), orjson.dumps(rank).decode()


class BlockPattern(NamedTuple):
    """One pattern for every line of a block: a line in the usual stamp form with a decode
    line of one shape or a prefill line of another, or any other line (the last group).
    Groups: the minute (minute()'s text), the seconds, the tail (tail()'s text), "D" for a
    decode line, the decode shape's values, the prefill shape's values, the other line."""

    rx: re.Pattern
    decode: Shape | None
    prefill: Shape | None
    prefill_at: int  # where the prefill shape's values start in a match's groups
    fast: tuple | None = None  # (decode, prefill) as the C reader takes them (logfast.specs), None: no C reader


def block_pattern(decode: Shape | None, prefill: Shape | None) -> BlockPattern:
    """A line matches a shape's alternative exactly where the quick path matches it line by
    line: the stamp in the form minute() and tail() read (it holds no "Decode batch"), the
    marker, the separator (", " or ". "), the shape's pieces to the end of the line."""
    body_d = r"(D)ecode batch[,.] " + decode.rx.pattern if decode else "(D)(?!)"  # (?!): never matches
    body_p = r"Prefill batch[,.] " + prefill.rx.pattern if prefill else "(?!)"
    rx = re.compile(rf"^(?:({_MINUTE_RX})([0-9]{{2}})({_TAIL_RX})(?:{body_d}|{body_p})|(.*))$", re.M)
    return BlockPattern(rx, decode, prefill, 4 + (decode.rx.groups if decode else 0))
