"""The optional C reader of SGLang's quick lines (_fastlog.c) and what it is given.

The C module is built at install time when a C compiler is there; without it, or with
DECODESCOPE_PURE_PYTHON=1 in the environment, logfused reads every line in Python. Both
give the same bytes: the C reader takes a line only where it reads it exactly as
logshapes.block_pattern and logfused._Pass.block do, and hands any other line holding
"batch" back to Python."""

import os

from decodescope.serverstats.logshapes import FLOAT, INT, Shape


def _load():
    if os.environ.get("DECODESCOPE_PURE_PYTHON"):
        return None
    try:
        from decodescope.serverstats import _fastlog
    except ImportError:  # not built (no compiler at install time): the Python path
        return None
    return _fastlog


FAST = _load()
_TYPES = {INT: 0, FLOAT: 1, "True": 2, "False": 3}
_SLOTS = 6  # the template's slots before the values: line_no, time_s, rank, accept_len, gen_tok_s, warmup


def specs(decode: Shape | None, prefill: Shape | None) -> tuple | None:
    """(decode, prefill) shapes as _fastlog.scan reads them; None without the C module."""
    if FAST is None:
        return None
    return _spec(decode, "decode", "\x00", "Decode batch"), _spec(prefill, "prefill", "false", "Prefill batch")


def _spec(shape: Shape | None, kind: str, flag: str, marker: str) -> tuple | None:
    """(kind, warm-up flag, marker, the text before each value, each value's type, (index,
    type) of running, accept and gen, the template's text between its slots), or None: the
    C reader leaves lines of this shape to Python (a key or template not in ASCII)."""
    if shape is None:
        return None
    groups = sum(t in (INT, FLOAT) for t in shape.types)
    pieces = _pieces(shape.template)
    if pieces is None or len(pieces) != _SLOTS + groups + 1:
        return None
    # the pieces and the template must fill in the same: checked once per shape with stand-ins
    stand_ins = [f"<{i}>" for i in range(1, _SLOTS + groups)]
    filled = "".join(p + x for p, x in zip(pieces, ["12345", *stand_ins])) + pieces[-1]
    if filled != shape.template % (12345, *stand_ins):
        return None
    try:
        literals = tuple(((", " if i else "") + k + ": ").encode("ascii") for i, k in enumerate(shape.keys))
        template = tuple(p.encode("ascii") for p in pieces)
    except UnicodeEncodeError:
        return None
    index = (*_index(shape.running), *_index(shape.accept), *_index(shape.gen))
    return kind, flag, marker.encode(), literals, tuple(_TYPES[t] for t in shape.types), index, template


def _index(at: tuple) -> tuple:
    i, read = at
    return (i, 0) if i < 0 else (i, _TYPES[INT] if read is int else _TYPES[FLOAT])


def _pieces(template: str) -> list[str] | None:
    """The text between a %-template's slots (%d, %s; %% is a %), None for any other slot."""
    pieces, cur, i = [], [], 0
    while i < len(template):
        c = template[i]
        if c != "%":
            cur.append(c)
            i += 1
            continue
        nxt = template[i + 1 : i + 2]
        if nxt == "%":
            cur.append("%")
        elif nxt in ("d", "s"):
            pieces.append("".join(cur))
            cur = []
        else:
            return None
        i += 2
    pieces.append("".join(cur))
    return pieces
