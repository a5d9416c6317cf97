"""Credentials out of everything measure stores or prints.

Every error, warning and header that reaches the run file, stdout or stderr passes
through here. Two nets:
- the secret values themselves (the API key, a password in --metrics-url, a key inside
  --extra-body), registered once at start-up and replaced wherever they appear, also in
  a server body that echoes them;
- patterns that look like credentials whatever their value: an Authorization header in
  any quoting, a Bearer / Basic token, user:password@ in a URL, an sk-... key, a
  key-like field name in a JSON or Python mapping.
An exception is described by its type and message, never its repr: aiohttp's repr of a
failed request carries the request's headers.
"""

import re

from yarl import URL

MASK = "***"
_MIN_SECRET = 4  # chars: a shorter "secret" would mask ordinary text
_secrets: set[str] = set()

# a field name that holds a credential: api_key, apiKey, x-api-key, token, secret, password, authorization
SECRET_NAME = re.compile(
    r"(x-)?(api[_-]?key|apikey|(access|auth|bearer|refresh)?[_-]?token|(client[_-]?)?secret|passw(or)?d"
    r"|authorization|credentials?)",
    re.I,
)
# token characters only: never a quote or backslash, so a masked JSON line stays JSON
_TOKEN = r"[A-Za-z0-9._~+/=:-]+"
_PATTERNS = (
    # 'Authorization': 'Bearer x' (repr), "authorization": "x" (JSON), Authorization: x (HTTP)
    re.compile(r"""(?i)(["']?(?:proxy-)?authorization["']?\s*[:=]\s*["']?)[^"'\\\r\n,}]*"""),
    re.compile(rf"(?i)\b((?:bearer|basic)\s+){_TOKEN}"),
    re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@\"']*:[^/\s@\"']*@"),  # scheme://user:pw@
    re.compile(r"\bsk-[A-Za-z0-9_-]{6,}"),
    re.compile(rf"""(?i)(["']?[a-z_-]*(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token|secret|passw(?:or)?d)["']?\s*[:=]\s*["']?){_TOKEN}"""),
)


def register(value: str | None) -> None:
    """Mask this value wherever it appears from now on (in this process)."""
    if value and len(value) >= _MIN_SECRET:
        _secrets.add(value)


def text(s: str) -> str:
    for v in sorted(_secrets, key=len, reverse=True):  # longest first: one may contain another
        if v in s:
            s = s.replace(v, MASK)
    for p in _PATTERNS:
        s = p.sub(_mask, s)
    return s


def _mask(m: re.Match) -> str:
    return (m.group(1) if m.lastindex else "") + MASK + ("@" if m.group(0).endswith("@") else "")


def url(u: str) -> str:
    """The URL without user and password (registered, so an echo of them is masked too)."""
    try:
        parsed = URL(u)
    except (ValueError, TypeError):
        return text(u)
    register(parsed.password)
    if parsed.user is None and parsed.password is None:
        return u
    register(parsed.user if parsed.password is None else None)  # a bare user@ is often a token
    return str(parsed.with_user(None))


def mapping(obj, key: str = ""):
    """A JSON-like value with every secret-named field masked and every string through text()."""
    if key and SECRET_NAME.fullmatch(key) and obj is not None:
        if isinstance(obj, str):
            register(obj)
        return MASK
    if isinstance(obj, dict):
        return {k: mapping(v, str(k)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [mapping(v) for v in obj]
    return text(obj) if isinstance(obj, str) else obj


def register_in(obj) -> None:
    """Register every string under a secret-named field of obj (e.g. --extra-body's api_key)."""
    mapping(obj)


def describe(exc: BaseException) -> str:
    """An exception as 'Type: message', masked; never repr() (it may hold request headers)."""
    msg = str(exc).strip()
    name = type(exc).__name__
    return text(f"{name}: {msg}" if msg else name)
