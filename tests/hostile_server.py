"""A server that attacks its client: raw HTTP on asyncio sockets, so it can send what no
HTTP library would (a garbage status line, a broken chunk size, a 20 KB header, a header
cut off mid-line, an endless stream).

Run: python tests/hostile_server.py --port P

The case is the first path segment: the client is pointed at http://127.0.0.1:P/CASE, so
it posts to /CASE/v1/chat/completions and lists /CASE/v1/models. GET /count/CASE answers
how many POSTs CASE has seen. Every case that can echoes the request's Authorization
header back, as a careless server does, so a test can look for the key in every output.
  ok                 a normal stream: 4 text chunks, usage, [DONE]
  slow               20 text chunks 50 ms apart
  echo401            401, the body quoting the Authorization header (also /v1/models)
  trickle            /v1/models sends one byte every 0.1 s, for ever
  error_event        one text chunk, then an error event quoting the header
  garbage_status     "HTTP/1.1 abc" and nothing sensible after
  big_header         200 with a 20 KB header line
  bad_chunk          two good chunks, then a chunk-size line "zz", then silence
  close_midheader    half a status block, then close (a fresh connection: no resend)
  redirect_other     302 to the same path on another host name (localhost)
  redirect_loop      307 to itself, forever
  redirect_307_other 307 to another host name
  endless            a text chunk every ms, never a finish
  burst              64 KiB text chunks as fast as the socket takes them, never a finish
  noblank            64 KiB frames of one event that never ends
  huge_event         one 50 MB event
  usage_neg | usage_zero | usage_true | usage_huge   completion_tokens -5, 0, true, 10**400
  usage_down         cumulative usage on every chunk: 1, 2, 3, 2
  content_int | content_list | content_dict   delta.content of that JSON type
  deep               a chunk nested 100,000 arrays deep
"""

import argparse
import asyncio
import collections
import json

KIB = 1024
TEXT = {"content_int": 5, "content_list": ["a"], "content_dict": {"a": 1}}
USAGE = {"usage_neg": "-5", "usage_zero": "0", "usage_true": "true", "usage_huge": "1" + "0" * 400}
seen = collections.Counter()


def chunk(text, usage=None, finish=None) -> bytes:
    delta = {} if text is None else {"content": text}
    obj = {"id": "hostile-1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta}]}
    obj["choices"][0]["finish_reason"] = finish
    body = json.dumps(obj)
    if usage is not None:  # a raw JSON literal: 10**400 or true as the server wrote them
        body = body[:-1] + f', "usage": {{"completion_tokens": {usage}}}}}'
    return b"data: " + body.encode() + b"\n\n"


class Conn:
    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    async def head(self, status: str, headers: dict, chunked: bool = True) -> None:
        lines = [f"HTTP/1.1 {status}", "Connection: close", *(f"{k}: {v}" for k, v in headers.items())]
        if chunked:
            lines.append("Transfer-Encoding: chunked")
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await self.writer.drain()

    async def send(self, data: bytes) -> None:
        self.writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await self.writer.drain()

    async def end(self) -> None:
        self.writer.write(b"0\r\n\r\n")
        await self.writer.drain()

    async def whole(self, status: str, body: bytes, headers: dict | None = None) -> None:
        await self.head(status, {**(headers or {}), "Content-Length": len(body)}, chunked=False)
        self.writer.write(body)
        await self.writer.drain()


async def handle(reader, writer) -> None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines if h)}
        await reader.readexactly(int(headers.get("content-length", 0)))
        await route(Conn(reader, writer), method, path, headers)
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass  # the client gave up on us: that is the point
    finally:
        writer.close()


async def route(c: Conn, method: str, path: str, headers: dict) -> None:
    parts = path.strip("/").split("/")
    if parts == ["health"]:
        return await c.whole("200 OK", b"ok")
    if parts[0] == "count":
        return await c.whole("200 OK", str(seen[parts[1]]).encode())
    case = parts[0]
    auth = headers.get("authorization", "")
    if path.endswith("/v1/models"):
        if case == "echo401":
            return await c.whole("401 Unauthorized", json.dumps({"error": f"bad header {auth}"}).encode())
        if case == "trickle":  # a byte every 0.1 s, for ever: never silent long enough for a read timeout
            await c.head("200 OK", {"Content-Type": "application/json"})
            while True:
                await c.send(b" ")
                await asyncio.sleep(0.1)
        return await c.whole("200 OK", json.dumps({"data": [{"id": "hostile"}]}).encode())
    if path == "/metrics":
        return await c.whole("200 OK", b"# TYPE vllm:generation_tokens counter\nvllm:generation_tokens 0\n")
    if method == "GET":  # e.g. --metrics-url: a 404 that quotes what it was sent
        return await c.whole("404 Not Found", f"no {path} for {auth}".encode())
    seen[case] += 1
    await CASES.get(case, ok)(c, case, auth, path)


async def ok(c: Conn, case, auth, path, n: int = 4, gap_s: float = 0) -> None:
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    for i in range(n):
        await asyncio.sleep(gap_s)
        await c.send(chunk(f"t{i} "))
    await c.send(chunk(None, finish="length"))
    await c.send(b'data: {"choices": [], "usage": {"completion_tokens": %d}}\n\n' % n)
    await c.send(b"data: [DONE]\n\n")
    await c.end()


async def slow(c, case, auth, path):
    await ok(c, case, auth, path, 20, 0.05)


async def echo401(c, case, auth, path):
    await c.whole("401 Unauthorized", json.dumps({"error": {"message": f"invalid header: Authorization: {auth}"}}).encode())


async def error_event(c, case, auth, path):
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    await c.send(chunk("a"))
    await c.send(b"data: " + json.dumps({"error": {"message": f"rejected {auth}", "key": auth[7:]}}).encode() + b"\n\n")
    await c.end()


async def garbage_status(c, case, auth, path):
    c.writer.write(b"HTTP/1.1 abc garbage\r\n\r\n")
    await c.writer.drain()


async def big_header(c, case, auth, path):
    await c.whole("200 OK", b"", {"X-Big": "a" * (20 * KIB)})


async def bad_chunk(c, case, auth, path):
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    await c.send(chunk("a"))
    await asyncio.sleep(0.2)  # the client has the headers and is reading the body
    data = chunk("b")  # a good chunk and a bad chunk-size line in one write
    c.writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\nzz\r\n" + chunk("c"))
    await c.writer.drain()
    await asyncio.sleep(3600)


async def close_midheader(c, case, auth, path):
    c.writer.write(b"HTTP/1.1 200 OK\r\nContent-")
    await c.writer.drain()


async def redirect(c, status: str, target: str) -> None:
    await c.whole(status, b"", {"Location": target})


async def redirect_other(c, case, auth, path):
    await redirect(c, "302 Found", f"http://localhost:{PORT}{path}")


async def redirect_loop(c, case, auth, path):
    await redirect(c, "307 Temporary Redirect", path)


async def redirect_307_other(c, case, auth, path):
    await redirect(c, "307 Temporary Redirect", f"http://localhost:{PORT}/ok/v1/chat/completions")


async def endless(c, case, auth, path):
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    while True:
        await c.send(chunk("x"))
        await asyncio.sleep(0.001)


async def burst(c, case, auth, path):
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    frame = chunk("x" * (64 * KIB))
    while True:
        await c.send(frame)


async def noblank(c, case, auth, path):
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    await c.send(b"data: ")
    frame = b"x" * (64 * KIB)
    while True:
        await c.send(frame)


async def huge_event(c, case, auth, path):
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    await c.send(b'data: {"choices": [{"delta": {"content": "')
    piece = b"x" * (1024 * KIB)
    for _ in range(50):
        await c.send(piece)
    await c.send(b'"}}]}\n\n')
    await c.send(b"data: [DONE]\n\n")
    await c.end()


async def bad_usage(c, case, auth, path):
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    for i in range(3):
        await c.send(chunk(f"t{i} "))
    await c.send(chunk(None, finish="stop"))
    await c.send(chunk(None, usage=USAGE[case]))
    await c.send(b"data: [DONE]\n\n")
    await c.end()


async def usage_down(c, case, auth, path):
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    for i, n in enumerate((1, 2, 3, 2)):
        await c.send(chunk(f"t{i} ", usage=n))
    await c.send(chunk(None, finish="stop"))
    await c.send(b"data: [DONE]\n\n")
    await c.end()


async def bad_text(c, case, auth, path):
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    await c.send(chunk("a"))
    await c.send(chunk(TEXT[case]))
    await c.send(chunk(None, finish="stop"))
    await c.end()


async def deep(c, case, auth, path):
    await c.head("200 OK", {"Content-Type": "text/event-stream"})
    await c.send(chunk("a"))
    await c.send(b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n")
    await c.end()


CASES = {f.__name__: f for f in (slow, echo401, error_event, garbage_status, big_header, bad_chunk, close_midheader,
                                 redirect_other, redirect_loop, redirect_307_other, endless, burst, noblank,
                                 huge_event, usage_down, deep)}
CASES |= {name: bad_usage for name in USAGE} | {name: bad_text for name in TEXT}
PORT = 0


async def main(port: int) -> None:
    global PORT
    PORT = port
    server = await asyncio.start_server(handle, "127.0.0.1", port, limit=64 * KIB)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    asyncio.run(main(parser.parse_args().port))
