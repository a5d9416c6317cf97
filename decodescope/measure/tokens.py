"""How many tokens a streamed response held, in total and per chunk, and where each count came from.

Total, in order of preference: the server's usage.completion_tokens, llama.cpp's
timings.predicted_n, a local tokenizer on the returned text, one token per text chunk.

Per chunk, in order of preference (exact first):
- "usage": the running completion_tokens the server puts on every chunk (vLLM's
  stream_options.continuous_usage_stats);
- "logprobs": one logprobs entry per token (requested with --logprobs);
- "tokenizer": the returned text re-tokenized locally, each token given to the chunk its
  first character arrived in (exact when the model's output re-tokenizes the same way);
- "even": none of these; the total spread evenly over the chunks (an estimate, flagged).
"""

from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path

from decodescope.errors import DecodescopeError


@dataclass(frozen=True)
class TokenCount:
    output_tokens: int
    token_count_source: str  # "usage", "timings", "logprobs", "tokenizer" or "chunks"
    chunk_tokens: tuple[int, ...] | None  # tokens in each text chunk, None when unknown
    chunk_source: str  # "usage", "logprobs", "tokenizer" or "even" (estimate)


def count_tokens(
    texts: list[str],
    usage_total: int | None,
    chunk_usage: list,
    tokenizer=None,
    chunk_logprobs: list | None = None,
    timings_total: int | None = None,
) -> TokenCount:
    per_chunk, source = _chunks_from_usage(chunk_usage), "usage"
    if per_chunk is None:
        per_chunk, source = _chunks_from_logprobs(chunk_logprobs), "logprobs"
    if per_chunk is None and tokenizer is not None and texts:
        per_chunk, source = _chunks_from_tokenizer(texts, tokenizer), "tokenizer"
    if per_chunk is None:
        source = "even"
    if usage_total is not None:
        return TokenCount(usage_total, "usage", per_chunk, source)
    if timings_total is not None:
        return TokenCount(timings_total, "timings", per_chunk, source)
    if per_chunk is not None:
        return TokenCount(sum(per_chunk), source, per_chunk, source)
    return TokenCount(len(texts), "chunks", None, source)


def _chunks_from_usage(chunk_usage: list) -> tuple[int, ...] | None:
    # servers with continuous usage stats send the running completion_tokens on every chunk
    if not chunk_usage or any(u is None for u in chunk_usage):
        return None
    return tuple(b - a for a, b in zip([0] + chunk_usage[:-1], chunk_usage))


def _chunks_from_logprobs(chunk_logprobs: list | None) -> tuple[int, ...] | None:
    # one logprobs entry per generated token; a text chunk without any: unknown
    if not chunk_logprobs or any(n is None for n in chunk_logprobs):
        return None
    return tuple(chunk_logprobs)


def _chunks_from_tokenizer(texts: list[str], tokenizer) -> tuple[int, ...]:
    ends, total = [], 0
    for t in texts:
        total += len(t)
        ends.append(total)
    counts = [0] * len(texts)
    for start, _ in tokenizer.encode("".join(texts), add_special_tokens=False).offsets:
        counts[min(bisect_right(ends, start), len(texts) - 1)] += 1
    return tuple(counts)


def load_tokenizer(path: str):
    """A Hugging Face `tokenizers` tokenizer from tokenizer.json (a file, or the folder holding it)."""
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        raise DecodescopeError(
            "--tokenizer needs the tokenizers package", "pip install tokenizers, or drop --tokenizer"
        ) from e
    p = Path(path)
    file = p / "tokenizer.json" if p.is_dir() else p
    try:
        return Tokenizer.from_file(str(file))
    except Exception as e:  # tokenizers raises its own Exception for a bad or missing file
        raise DecodescopeError(
            f"cannot load a tokenizer from {path}: {e}", "pass a tokenizer.json or the folder holding it"
        ) from e
