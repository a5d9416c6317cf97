"""Prompt suites: text of different predictability, because speculative acceptance
(and so decode tok/s) depends on how predictable the text is.

A suite is a JSONL file, one prompt per line: {"prompt": "..."} or
{"messages": [{"role": ..., "content": ...}, ...]}, with an optional "max_tokens".
Bundled: repetitive (counting, repeated lines), code, prose.
"""

import json
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from decodescope.errors import DecodescopeError

BUNDLED = ("repetitive", "code", "prose")


@dataclass(frozen=True)
class Prompt:
    prompt: str | None = None
    messages: tuple[dict, ...] | None = None
    max_tokens: int | None = None

    def as_messages(self) -> list[dict]:
        if self.messages is not None:
            return list(self.messages)
        return [{"role": "user", "content": self.prompt}]

    def as_text(self) -> str:
        # /v1/completions takes one string: a chat prompt's contents joined by blank lines
        if self.prompt is not None:
            return self.prompt
        return "\n\n".join(str(m.get("content", "")) for m in self.messages)


@dataclass(frozen=True)
class Suite:
    name: str
    prompts: tuple[Prompt, ...]


def load_suite(spec: str) -> Suite:
    """A bundled suite by name, or a user's JSONL file by path (named after its stem)."""
    if spec in BUNDLED:
        text = resources.files("decodescope.measure").joinpath(f"suites/{spec}.jsonl").read_text()
        return Suite(spec, _parse(text, spec))
    path = Path(spec)
    if not path.is_file():
        raise DecodescopeError(
            f"no prompt suite {spec!r}", f"use one of {', '.join(BUNDLED)} or the path of a .jsonl file"
        )
    return Suite(path.stem, _parse(path.read_text(), str(path)))


def _parse(text: str, where: str) -> tuple[Prompt, ...]:
    prompts = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            prompts.append(_prompt(line, f"{where}:{n}"))
    if not prompts:
        raise DecodescopeError(f"{where} holds no prompts", 'write one {"prompt": "..."} object per line')
    return tuple(prompts)


def _prompt(line: str, where: str) -> Prompt:
    fix = 'each line must be {"prompt": "..."} or {"messages": [...]}, with an optional integer "max_tokens"'
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise DecodescopeError(f"{where}: not JSON ({e})", fix) from e
    if not isinstance(obj, dict):
        raise DecodescopeError(f"{where}: not a JSON object", fix)
    max_tokens = obj.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
        raise DecodescopeError(f"{where}: max_tokens must be a positive integer", fix)
    if isinstance(obj.get("prompt"), str):
        return Prompt(prompt=obj["prompt"], max_tokens=max_tokens)
    messages = obj.get("messages")
    if isinstance(messages, list) and messages and all(isinstance(m, dict) and "role" in m for m in messages):
        return Prompt(messages=tuple(messages), max_tokens=max_tokens)
    raise DecodescopeError(f"{where}: no usable 'prompt' or 'messages'", fix)


# common English words, each one token (with its leading space) in the usual BPE vocabularies
WORDS = (
    "the of and to in is was for on that with as by at from his her are this have had not but"
    " were which one all their they can been has more when who will would there what about out"
    " time up into only new some could these two may then first any like other than also after"
    " made over did many before must through back years where much your way well down should"
    " because each just those people how too little state good very make world still own see men"
    " work long get here between both life being under never day same another know while last"
)


def synthetic_suite(input_tokens: int, n_prompts: int, tokenizer=None, seed: int = 0) -> tuple[Suite, bool]:
    """n_prompts prompts of input_tokens tokens each, of seeded random common words (each
    prompt different from its first word, so a prefix cache does not serve one for
    another). Exact with a tokenizer (the prompt text; a chat template adds its own);
    without one, one word per token: approximate. Returns (suite, exact)."""
    import random

    rng = random.Random(seed)
    words = WORDS.split()
    prompts = []
    for _ in range(n_prompts):
        text = " ".join(rng.choice(words) for _ in range(input_tokens))
        if tokenizer is not None:
            text = _trim_to_tokens(text, input_tokens, tokenizer, rng, words)
        prompts.append(Prompt(prompt=text))
    return Suite(f"synthetic-{input_tokens}", tuple(prompts)), tokenizer is not None


def _trim_to_tokens(text: str, n: int, tokenizer, rng, words) -> str:
    # the shortest prefix of the text with n tokens (a prefix one character longer has at
    # most one token more, in practice): grow the text past n, then bisect on its length
    def count(t):
        return len(tokenizer.encode(t, add_special_tokens=False).ids)

    while count(text) < n + 1:
        text += " " + rng.choice(words)
    lo, hi = 0, len(text)  # count(text[:lo]) < n <= count(text[:hi])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(text[:mid]) < n else (lo, mid)
    if count(text[:hi]) != n:
        raise DecodescopeError(
            f"cannot make a prompt of exactly {n} tokens with this tokenizer", "try another --input-tokens"
        )
    return text[:hi]
