"""First contact with the server, before any request is timed: GET /v1/models says at
once whether anything listens at the URL (one clear error, not one failure per request),
which model it serves and which engine it is (the "owned_by" of its models), and so which
request fields force a fixed output length."""

from dataclasses import dataclass

import aiohttp

from decodescope.errors import DecodescopeError
from decodescope.measure import redact

# engine ("owned_by" in /v1/models) -> the body fields that make it generate exactly N
# tokens. vLLM and SGLang take both (SamplingParams ignore_eos / min_tokens); llama-server
# takes ignore_eos; transformers serve rejects unknown fields (HTTP 422): nothing.
FIXED_LENGTH = {
    "vllm": ("ignore_eos", "min_tokens"),
    "sglang": ("ignore_eos", "min_tokens"),
    "llamacpp": ("ignore_eos",),
}


@dataclass(frozen=True)
class Server:
    models: tuple[str, ...]  # ids listed by /v1/models; empty when it has none
    owned_by: str | None  # the engine, as its first model names it
    problem: str | None = None  # why /v1/models listed nothing: "HTTP 401: <body>", secrets masked


async def first_contact(session: aiohttp.ClientSession, root: str, headers: dict) -> Server:
    """The server's models; a DecodescopeError when nothing answers at root."""
    url = root + "/v1/models"
    try:
        async with session.get(url, headers=headers) as resp:
            if resp.status != 200:  # something answers; the first request will say more
                body = (await resp.text(errors="replace"))[:300]
                return Server((), None, redact.text(f"HTTP {resp.status}: {body}"))
            data = await resp.json(content_type=None)
    except aiohttp.ClientConnectorError as e:
        raise DecodescopeError(
            redact.text(f"cannot connect to {root}: {e.os_error or e}"), "is the server running? check the host and port"
        ) from e
    except TimeoutError as e:
        raise DecodescopeError(redact.text(f"no answer from {url} within --timeout"), "check the URL, or raise --timeout") from e
    except (aiohttp.ClientError, ValueError):  # answered, but not with a JSON model list
        return Server((), None)
    listed = data.get("data") if isinstance(data, dict) else None
    models = [m for m in listed or [] if isinstance(m, dict) and isinstance(m.get("id"), str)]
    owned_by = models[0].get("owned_by") if models else None
    return Server(tuple(m["id"] for m in models), owned_by if isinstance(owned_by, str) else None)


def fixed_length_body(owned_by: str | None, output_tokens: int) -> dict:
    """The extra body fields that force output_tokens on this engine ({} when unknown)."""
    fields = FIXED_LENGTH.get(owned_by or "", ())
    values = {"ignore_eos": True, "min_tokens": output_tokens}
    return {f: values[f] for f in fields}
