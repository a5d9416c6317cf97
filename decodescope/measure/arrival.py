"""A streamed response's bytes, handed on as each socket read happens and stamped with
the time they arrived.

With 32 streams, one decode step on the server sends 32 chunks at once. Read the usual
way, one event-loop pass reads the 32 sockets and wakes 32 coroutines, and each reads
its clock late by the work of those woken before it; bytes that arrive meanwhile wait
for the whole pass. So for the duration of a response its connection's protocol is
wrapped: its data_received (the asyncio callback the transport calls with each socket
read) lets aiohttp parse the HTTP framing, then takes the new payload bytes straight out
of the response and hands them to `on_data` with the read's time. The reading coroutine
is not woken per chunk at all; it waits for the end of the response.

The time of a read, best first:
- on a loop from new_event_loop() on Linux, the kernel's receive stamp: its TCP sockets
  have SO_TIMESTAMPNS set and are read with recvmsg, which hands back when the last
  segment of the read came in off the wire (loopback: when the server wrote it). The
  client's own work — the rest of a loop pass, parsing, being scheduled off the CPU —
  then adds nothing to a gap (benchmarks/client_overhead.py, 32 streams on 2 cores:
  p99 error 0.05-0.11 ms against 0.7-0.8 ms with the wake stamp). The stamp is
  CLOCK_REALTIME; it is moved onto perf_counter_ns's clock by the offset between the
  two read at each loop wake-up. A read that holds several events (the client fell a
  whole interval behind) gives them all the last one's stamp. Each socket keeps the
  stamp of its own last read, so a read never takes another socket's stamp, and the
  bytes that came with the headers get the stamp of the read that brought them.
- on that loop elsewhere (or a TLS socket, or a read the kernel did not stamp), the
  moment the loop's wait for sockets returned, since every byte read in that pass was
  there by then (a clock read in data_received would add the reads served before it in
  the same pass, ~25 us each);
- on any other asyncio selector loop, perf_counter_ns() in data_received;
- where the protocol cannot be wrapped (another kind of loop, a future aiohttp), the
  coroutine reads the response and reads the clock itself.
A read's bytes came after the previous read's, so within one stream a read's time is
never earlier than the previous one's: where its stamp says so, it takes the previous
time instead. That happens when the two kinds of stamp meet (a wake stamp is late by up
to a loop pass, so a kernel stamp after it can be earlier: -0.2 ms under a burst of
64 KiB frames) and between kernel stamps of one segment read in two passes (the clock
offset read at one wake-up and the next differ by up to ~0.5 us).
"""

import asyncio
import platform
import selectors
import socket
import struct
import sys
import time

import aiohttp


# SO_TIMESTAMPNS (= SCM_TIMESTAMPNS) of asm-generic/socket.h; Python's socket module has
# no name for it. Other architectures number it differently: they get the wake stamp.
_SO_TIMESTAMPNS = 35
KERNEL_STAMPS = sys.platform == "linux" and platform.machine() in ("x86_64", "aarch64")
_TIMESPEC = struct.Struct("qq")  # tv_sec, tv_nsec: 64-bit on both
_ANC_BYTES = socket.CMSG_SPACE(_TIMESPEC.size) if KERNEL_STAMPS else 0


class ReadStamps(selectors.DefaultSelector):
    """The loop's selector, also holding when its last wait returned and each socket's last read (perf_counter_ns)."""

    woke_ns = 0  # when the loop's last wait for sockets returned
    kernel_reads = 0  # socket reads the kernel stamped, since the loop began

    def __init__(self):
        super().__init__()
        self.real_offset_ns = time.time_ns() - time.perf_counter_ns()  # CLOCK_REALTIME - perf_counter_ns
        self.last_read_ns: dict[int, int | None] = {}  # fd: kernel stamp of its last read, None if unstamped
        # Linux turns receive stamps on lazily (a deferred work item) when the first socket
        # on the machine asks, so the reads just after would go unstamped: ask now, with a
        # socket held open for the loop's life, and wait until a loopback read is stamped
        # (here 12 of 40 fresh loops found stamps still off at their first probe read)
        self._stamps_on = None
        if KERNEL_STAMPS:
            self._stamps_on = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                self._stamps_on.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                _wait_for_stamps(deadline_s=0.25)
            except OSError:
                pass  # a kernel without it (or no loopback): the wake stamp

    def close(self):
        if self._stamps_on is not None:
            self._stamps_on.close()
        super().close()

    def select(self, timeout=None):
        ready = super().select(timeout)
        before = time.perf_counter_ns()
        real = time.time_ns()
        after = time.perf_counter_ns()
        self.woke_ns = before
        # the three reads take ~0.2 us; taken off the CPU in between (16 ms seen here), the
        # offset would be off by that time and so would every stamp of this pass
        if after - before < 20_000:
            self.real_offset_ns = real - (before + after) // 2
        return ready

    def read_ns(self, fd: int) -> int:
        """The time of the socket's last read: its kernel stamp, else this pass's wake-up."""
        t = self.last_read_ns.get(fd)
        return self.woke_ns if t is None else t


def _wait_for_stamps(deadline_s: float) -> None:
    """Until a TCP read over loopback comes back stamped, or deadline_s (s) passes.
    The deferred work that turns stamps on may not have run by the time the first stream
    connects (the project's CI: one of 8 fresh loops had one read unstamped), and a
    segment that came in before it ran carries no stamp: wait for it here, once per loop
    (~0.7 ms when already on, ~1.8 ms when it had to wait one retry)."""
    end = time.monotonic() + deadline_s
    with socket.create_server(("127.0.0.1", 0)) as srv:
        with socket.create_connection(srv.getsockname(), timeout=deadline_s) as c, srv.accept()[0] as s:
            c.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            while True:
                s.sendall(b"x")
                _, ancillary, _, _ = c.recvmsg(16, _ANC_BYTES)
                if ancillary or time.monotonic() > end:
                    return
                time.sleep(0.001)


class _StampedSocket(socket.socket):
    """A TCP socket whose recv() also keeps the kernel's receive stamp of what it read."""

    __slots__ = ("stamps", "fd")

    def recv(self, bufsize, flags=0):
        data, ancillary, _, _ = self.recvmsg(bufsize, _ANC_BYTES, flags)
        t = None
        for level, kind, raw in ancillary:
            if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS and len(raw) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(raw)
                t = sec * 1_000_000_000 + nsec - self.stamps.real_offset_ns
                self.stamps.kernel_reads += 1
        self.stamps.last_read_ns[self.fd] = t
        return data


class _StampingLoop(asyncio.SelectorEventLoop):
    def _make_socket_transport(self, sock, protocol, waiter=None, **kw):
        self.decodescope_read_stamps.last_read_ns.pop(sock.fileno(), None)  # a reused fd: not the old socket's stamp
        return super()._make_socket_transport(self._stamped(sock), protocol, waiter, **kw)

    def _stamped(self, sock: socket.socket) -> socket.socket:
        if not KERNEL_STAMPS or sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.type != socket.SOCK_STREAM:
            return sock
        try:
            sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        except OSError:
            return sock  # a kernel without it: the wake stamp
        stamped = _StampedSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
        stamped.setblocking(False)
        stamped.stamps = self.decodescope_read_stamps
        stamped.fd = stamped.fileno()
        return stamped


def new_event_loop() -> asyncio.AbstractEventLoop:
    """An asyncio loop whose socket reads are stamped when their bytes arrived: by the
    kernel where it can (Linux), else when the loop's wait for sockets returned."""
    selector = ReadStamps()
    loop = _StampingLoop(selector)
    loop.decodescope_read_stamps = selector
    return loop


def _read_clock(transport, clock):
    """The time of the socket's last read (see the module's docstring)."""
    stamps = getattr(asyncio.get_running_loop(), "decodescope_read_stamps", None)
    if stamps is None:
        return clock
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is None:
        return lambda: stamps.woke_ns
    fd = sock.fileno()
    return lambda: stamps.read_ns(fd)


async def read_stamped(resp, on_data, clock=time.perf_counter_ns) -> bool:
    """Hand every payload byte of `resp` to on_data(bytes, t_ns) until the response ends,
    t_ns never falling. True when the reads were stamped in the protocol callback, False
    when by the coroutine. A body aiohttp cannot parse fails at once (ClientPayloadError)."""
    content = resp.content
    proto = resp.connection.protocol if resp.connection is not None else None
    # asyncio's own selector transports look data_received up on every read; other loops
    # (uvloop) may keep the bound method, so a wrapper would never be called there
    selector_loop = isinstance(asyncio.get_running_loop(), asyncio.selector_events.BaseSelectorEventLoop)
    if not selector_loop or proto is None or not hasattr(proto, "__dict__") or "data_received" in vars(proto):
        async for data in content.iter_any():  # cannot wrap (or someone else did): coroutine-side clock
            on_data(data, clock())
        return False
    received = proto.data_received
    read_time = _read_clock(proto.transport, clock)
    last_t = 0
    draining = False

    def stamp() -> int:
        nonlocal last_t
        last_t = max(last_t, read_time())  # never before the previous read (module docstring)
        return last_t

    def data_received(data: bytes) -> None:
        nonlocal draining
        if not data or draining:  # aiohttp calls back in (empty) when a drain resumes reading
            return received(data)
        t = stamp()
        received(data)  # aiohttp: HTTP framing, then the payload into `content`
        draining = True
        try:
            _drain(content, on_data, t)
        finally:
            draining = False
        _fail_on_parse_error(resp, proto)

    # bytes that came with the headers: the time of the socket's read that brought them
    _drain(content, on_data, stamp())
    proto.data_received = data_received
    try:
        await content.wait_eof()
    finally:
        del proto.data_received  # the connection goes back to the pool as it was
    _drain(content, on_data, stamp())
    return True


def _fail_on_parse_error(resp, proto) -> None:
    """aiohttp closes the connection on a body it cannot parse (a broken chunk-size line),
    but puts the error on the connection, not on the body: whoever waits for the body's
    end would wait until some deadline. Hand the error to the body."""
    content = resp.content
    err = proto.exception()
    if err is None or content.is_eof() or content.exception() is not None:
        return
    what = "chunked body" if "chunked" in resp.headers.get("Transfer-Encoding", "").lower() else "response body"
    why = str(getattr(err, "message", "") or err).splitlines()[0].rstrip(":") or type(err).__name__
    content.set_exception(aiohttp.ClientPayloadError(f"malformed {what}: {why}"), err)


def _drain(content, on_data, t: int) -> None:
    if content.exception() is not None:
        return  # the payload failed (e.g. a broken chunk): wait_eof raises it in the reader
    data = content.read_nowait(-1)
    if data:
        on_data(data, t)
