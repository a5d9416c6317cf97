"""Read the Python reprs engines print at start-up, without evaluating them.

SGLang prints `ServerArgs(model_path='…', tp_size=2, …)`, vLLM `non-default args: {'dtype':
'bfloat16', …}` and `… with config: model='…', dtype=torch.bfloat16, …`. Pasted logs are
often cut short mid-value, so the splitter never needs the closing bracket: it walks the
text once, tracking quotes and bracket depth, and returns every complete `key=value` /
`'key': value` pair it saw. Values go through `ast.literal_eval` (literals only, never
code); anything else (`torch.bfloat16`, `SpeculativeConfig(…)`, `auto`) stays text."""

import ast

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = set(_OPEN.values())


def split_top(text: str) -> list[str]:
    """Split at commas outside quotes and brackets; a cut-off last piece is dropped."""
    parts, depth, quote, start, i = [], 0, "", 0, 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth < 0:  # the closing bracket of the enclosing call: the end
                parts.append(text[start:i])
                return [p for p in parts if p.strip()]
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        i += 1
    # text ended inside a value (a pasted line cut short): keep the piece only when complete
    if not quote and depth == 0 and text[start:].strip():
        parts.append(text[start:])
    return [p for p in parts if p.strip()]


def value(text: str):
    """A literal (str, int, float, bool, None, list, dict) as Python sees it; else the text."""
    t = text.strip()
    try:
        return ast.literal_eval(t)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return t


def pairs(text: str) -> dict:
    """'a=1, b='x'' or "'a': 1, 'b': 'x'" -> {'a': 1, 'b': 'x'} (later keys win)."""
    out = {}
    for part in split_top(text):
        key, sep, raw = _key_value(part)
        if sep and key.isidentifier():
            out[key] = value(raw)
    return out


def _key_value(part: str) -> tuple[str, str, str]:
    p = part.strip()
    if p[:1] in "'\"":  # dict item: 'key': value
        end = p.find(p[0], 1)
        if end > 0 and p[end + 1:].lstrip().startswith(":"):
            return p[1:end], ":", p[end + 1:].lstrip()[1:]
        return "", "", ""
    key, sep, raw = p.partition("=")
    return key.strip(), sep, raw


def call_args(text: str, name: str) -> dict | None:
    """The keyword arguments of the first `name(...)` in text, or None without one."""
    at = text.find(name + "(")
    if at < 0:
        return None
    return pairs(text[at + len(name) + 1:])
