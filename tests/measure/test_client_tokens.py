"""Where a response's token count comes from: server usage, then a local tokenizer,
then one per chunk, and the per-chunk split when it can be known."""

import pytest

from decodescope.errors import DecodescopeError
from decodescope.measure.tokens import count_tokens, load_tokenizer


@pytest.fixture(scope="module")
def word_tokenizer(tmp_path_factory):
    # a real tokenizer.json: one token per whitespace-separated word
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {w: i for i, w in enumerate(["<unk>", "one", "two", "three", "four", "five"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    path = tmp_path_factory.mktemp("wordtok")
    tok.save(str(path / "tokenizer.json"))
    return load_tokenizer(str(path))


TEXTS = ["one two", " three", " four five"]


def test_usage_total_wins_over_chunk_count():
    c = count_tokens(TEXTS, usage_total=9, chunk_usage=[None, None, None])
    assert (c.output_tokens, c.token_count_source, c.chunk_tokens) == (9, "usage", None)


def test_without_usage_or_tokenizer_each_chunk_is_one_token():
    c = count_tokens(TEXTS, usage_total=None, chunk_usage=[None] * 3)
    assert (c.output_tokens, c.token_count_source, c.chunk_tokens) == (3, "chunks", None)


def test_cumulative_usage_on_every_chunk_gives_tokens_per_chunk():
    # vLLM continuous_usage_stats: the running completion_tokens rides on each chunk
    c = count_tokens(TEXTS, usage_total=9, chunk_usage=[1, 5, 9])
    assert (c.output_tokens, c.token_count_source, c.chunk_tokens) == (9, "usage", (1, 4, 4))


def test_tokenizer_counts_text_and_splits_by_chunk(word_tokenizer):
    c = count_tokens(TEXTS, usage_total=None, chunk_usage=[None] * 3, tokenizer=word_tokenizer)
    assert (c.output_tokens, c.token_count_source, c.chunk_tokens) == (5, "tokenizer", (2, 1, 2))


def test_a_token_belongs_to_the_chunk_its_first_character_came_in(word_tokenizer):
    c = count_tokens(["on", "e tw", "o"], usage_total=None, chunk_usage=[None] * 3, tokenizer=word_tokenizer)
    assert c.chunk_tokens == (1, 1, 0)


def test_usage_total_stays_the_total_when_a_tokenizer_splits_chunks(word_tokenizer):
    c = count_tokens(TEXTS, usage_total=6, chunk_usage=[None] * 3, tokenizer=word_tokenizer)
    assert (c.output_tokens, c.token_count_source, c.chunk_tokens) == (6, "usage", (2, 1, 2))


def test_a_missing_tokenizer_folder_is_a_clear_error(tmp_path):
    with pytest.raises(DecodescopeError, match="cannot load a tokenizer"):
        load_tokenizer(str(tmp_path))
