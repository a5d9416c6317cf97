"""How many tokens a streamed response held, in total and per chunk, and where the count came from.

Order of preference for the total: the server's own usage.completion_tokens, then a
local tokenizer on the returned text, then one token per text chunk. Per chunk: the
cumulative usage when the server sends it on every chunk, else the tokenizer (each
token goes to the chunk its first character arrived in), else unknown (None).
"""

from bisect import bisect_right
from dataclasses import dataclass

from decodescope.errors import DecodescopeError


@dataclass(frozen=True)
class TokenCount:
    output_tokens: int
    token_count_source: str  # "usage", "tokenizer" or "chunks"
    chunk_tokens: tuple[int, ...] | None  # tokens in each text chunk, None when unknown


def count_tokens(texts: list[str], usage_total: int | None, chunk_usage: list, tokenizer=None) -> TokenCount:
    per_chunk = _chunks_from_usage(chunk_usage)
    if per_chunk is None and tokenizer is not None and texts:
        per_chunk = _chunks_from_tokenizer(texts, tokenizer)
    if usage_total is not None:
        return TokenCount(usage_total, "usage", per_chunk)
    if per_chunk is not None:  # only the tokenizer gets here
        return TokenCount(sum(per_chunk), "tokenizer", per_chunk)
    return TokenCount(len(texts), "chunks", None)


def _chunks_from_usage(chunk_usage: list) -> tuple[int, ...] | None:
    # servers with continuous usage stats send the running completion_tokens on every chunk
    if not chunk_usage or any(u is None for u in chunk_usage):
        return None
    return tuple(b - a for a, b in zip([0] + chunk_usage[:-1], chunk_usage))


def _chunks_from_tokenizer(texts: list[str], tokenizer) -> tuple[int, ...]:
    ends, total = [], 0
    for t in texts:
        total += len(t)
        ends.append(total)
    enc = tokenizer("".join(texts), add_special_tokens=False, return_offsets_mapping=True)
    counts = [0] * len(texts)
    for start, _ in enc["offset_mapping"]:
        counts[min(bisect_right(ends, start), len(texts) - 1)] += 1
    return tuple(counts)


def load_tokenizer(path: str):
    """A fast Hugging Face tokenizer from a local folder (transformers imported only here)."""
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        raise DecodescopeError(
            "--tokenizer needs the transformers package", "pip install transformers, or drop --tokenizer"
        ) from e
    try:
        tok = AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise DecodescopeError(f"cannot load a tokenizer from {path}: {e}", "pass a folder with tokenizer.json") from e
    if not getattr(tok, "is_fast", False):
        raise DecodescopeError(f"the tokenizer in {path} is not a fast tokenizer", "use a tokenizer.json tokenizer")
    return tok
