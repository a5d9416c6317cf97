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
