"""Per-request rates from the token counts of each chunk, where chunks may carry several
tokens (speculative rounds, stream intervals, text held back until it is valid UTF-8 or
past a stop string).

Decode tok/s is the tokens that arrived after the first read that held content over the
time from that read to the last content chunk: every chunk of that first read (one arrival
stamp) was made before the clock starts, however many tokens it holds. A client that wakes
late finds several chunks in its first read; counting those as decode would shrink the
window and not the tokens (a stall of 8 of 20 rounds reads 1.8 x fast). TPOT is `vllm bench serve`'s: (end-to-end latency - TTFT) /
(output tokens - 1), which counts every token after the first one as decode, so it reads
high (fast) when the first chunk holds back many tokens; both are reported.
"""

from decodescope.measure.tokens import TokenCount


def first_chunk_tokens(tokens: TokenCount, n_chunks: int, lead: int) -> float:
    """Tokens in the first `lead` content chunks: counted when the server or tokenizer says
    so (scaled to the total when a re-tokenized text counts differently), else the total
    spread evenly over the chunks ("even", an estimate)."""
    per = tokens.chunk_tokens
    if per and sum(per) > 0:
        return sum(per[:lead]) * tokens.output_tokens / sum(per)
    return tokens.output_tokens * lead / n_chunks if n_chunks else 0.0


def decode_tok_s(tokens: TokenCount, times_ns: list[int]) -> float | None:
    if len(times_ns) < 2:
        return None
    # the chunks of the first read share its arrival stamp
    lead = next((i for i, t in enumerate(times_ns) if t != times_ns[0]), len(times_ns))
    span_s = (times_ns[-1] - times_ns[0]) / 1e9
    after_first = tokens.output_tokens - first_chunk_tokens(tokens, len(times_ns), lead)
    return after_first / span_s if span_s > 0 and after_first > 0 else None


def tpot_ms(latency_ms: float | None, ttft_ms: float | None, output_tokens: int) -> float | None:
    """`vllm bench serve`'s time per output token, ms: (latency - TTFT) / (tokens - 1)."""
    if latency_ms is None or ttft_ms is None or output_tokens < 2:
        return None
    return (latency_ms - ttft_ms) / (output_tokens - 1)


def timings_tok_s(timings: dict | None) -> float | None:
    """llama.cpp's own decode rate of this request, tok/s: predicted_n / predicted_ms."""
    if not timings:
        return None
    n, ms = timings.get("predicted_n"), timings.get("predicted_ms")
    if isinstance(n, int | float) and isinstance(ms, int | float) and ms > 0 and n > 0:
        return n / (ms / 1e3)
    return None
