"""Prompt suites: the bundled ones, a user's JSONL, and the request body each prompt makes."""

import json
from dataclasses import dataclass

import pytest

from decodescope.errors import DecodescopeError
from decodescope.measure.client import Endpoint, Job, Sampling, base_url, payload
from decodescope.measure.suites import BUNDLED, Prompt, load_suite


@pytest.mark.parametrize("name", BUNDLED)
def test_bundled_suites_hold_a_dozen_distinct_prompts(name):
    s = load_suite(name)
    assert s.name == name and len(s.prompts) == 12
    assert len({p.prompt for p in s.prompts}) == 12


def test_the_seed_scenario_prompt_is_in_the_repetitive_suite():
    texts = [p.prompt for p in load_suite("repetitive").prompts]
    assert "Write the numbers 1 through 500, each on a new line." in texts


def test_a_user_suite_takes_prompts_messages_and_max_tokens(tmp_path):
    path = tmp_path / "mine.jsonl"
    lines = [
        {"prompt": "hi", "max_tokens": 7},
        {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "why?"}]},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    s = load_suite(str(path))
    assert s.name == "mine"
    assert s.prompts[0] == Prompt(prompt="hi", max_tokens=7)
    assert s.prompts[1].as_text() == "be brief\n\nwhy?", "completions get the contents joined"


@dataclass
class Bad:
    name: str
    line: str
    says: str


BAD = [
    Bad("not JSON", "{prompt: 1}", "mine.jsonl:1: not JSON"),
    Bad("not an object", "[1, 2]", "not a JSON object"),
    Bad("neither prompt nor messages", '{"text": "x"}', "no usable"),
    Bad("max_tokens not positive", '{"prompt": "x", "max_tokens": 0}', "max_tokens"),
]


@pytest.mark.parametrize("bad", BAD, ids=lambda b: b.name)
def test_a_bad_suite_line_is_a_clear_error_with_its_line(tmp_path, bad):
    path = tmp_path / "mine.jsonl"
    path.write_text(bad.line + "\n")
    with pytest.raises(DecodescopeError, match=bad.says):
        load_suite(str(path))


def test_an_unknown_suite_name_lists_the_bundled_ones():
    with pytest.raises(DecodescopeError) as e:
        load_suite("poetry")
    assert "repetitive" in e.value.fix


@dataclass
class Body:
    name: str
    api: str
    prompt: Prompt
    want: dict


BODIES = [
    Body(
        "chat wraps a prompt as one user message",
        "chat",
        Prompt("hi"),
        {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 64},
    ),
    Body("completions sends the text", "completions", Prompt("hi"), {"prompt": "hi", "max_tokens": 64}),
    Body("a prompt's own max_tokens wins", "chat", Prompt("hi", max_tokens=5), {"max_tokens": 5}),
]


@pytest.mark.parametrize("b", BODIES, ids=lambda b: b.name)
def test_request_body(b):
    body = payload(
        Endpoint("http://x", b.api, "m"), Job("s", 0, b.prompt), Sampling(64, 0.0, 5.0, {"ignore_eos": True})
    )
    assert body | b.want == body, body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert body["ignore_eos"] is True, "--extra-body fields reach the server"


@pytest.mark.parametrize(
    "url",
    [
        "http://h:8000",
        "http://h:8000/",
        "http://h:8000/v1",
        "http://h:8000/v1/chat/completions",
        "http://u:pw@h:8000/v1/completions",
        "http://h:8000/v1/models",
    ],
)
def test_any_form_of_the_server_url_gives_its_root(url):
    assert base_url(url) == "http://h:8000"


def test_a_non_http_url_is_an_error():
    with pytest.raises(DecodescopeError, match="not an http"):
        base_url("localhost:8000")
