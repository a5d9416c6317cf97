"""Redirects of the POST that streams a completion, and what counts as a stale connection.

By default no redirect is followed: a 3xx fails its request and says where it pointed.
With --follow-redirects only 307 and 308 are followed, as they resend the same POST
(a 301/302/303 would turn it into a GET without a body), and only to the same host and
port unless "any" is given. A request is sent again only when it failed before any
answer on a pooled connection (the server had closed it); aiohttp says which connection
was reused through its trace hooks.
"""

import aiohttp
from yarl import URL

POLICIES = ("none", "same-host", "any")
KEEPS_POST = (307, 308)


class RedirectRefused(aiohttp.ClientError):
    """A redirect the policy does not allow; fails the request as a client error."""


def request_ctx(policy: str) -> dict:
    return {"reused": False, "policy": policy}


def post_kwargs(policy: str, ctx: dict) -> dict:
    return {"allow_redirects": policy != "none", "max_redirects": 5, "trace_request_ctx": ctx}


def location(resp) -> str:
    """'redirected to X, not followed: ' for a 3xx response, else ''."""
    where = resp.headers.get("Location")
    if not 300 <= resp.status < 400 or where is None:
        return ""
    return f"redirected to {where[:200]}, not followed (see --follow-redirects): "


def trace_config() -> aiohttp.TraceConfig:
    trace = aiohttp.TraceConfig()
    trace.on_connection_reuseconn.append(_reused)
    trace.on_request_redirect.append(_check)
    return trace


async def _reused(session, ctx, params) -> None:
    if isinstance(ctx.trace_request_ctx, dict):
        ctx.trace_request_ctx["reused"] = True


async def _check(session, ctx, params) -> None:
    policy = ctx.trace_request_ctx.get("policy") if isinstance(ctx.trace_request_ctx, dict) else None
    if policy is None:
        return  # not a request of ours (e.g. GET /v1/models): aiohttp's defaults
    resp = params.response
    target = params.url.join(URL(resp.headers.get("Location", "")))
    if resp.status not in KEEPS_POST:
        raise RedirectRefused(f"HTTP {resp.status} to {target}: not followed, it would resend the POST as a GET")
    if policy == "same-host" and (target.host, target.port) != (params.url.host, params.url.port):
        raise RedirectRefused(f"HTTP {resp.status} to another host, {target.origin()}: not followed "
                              "(--follow-redirects any allows it)")
