"""A streamed response's bytes, handed on as each socket read happens and stamped then.

With 32 streams, one decode step on the server sends 32 chunks at once. Read the usual
way, one event-loop pass reads the 32 sockets and wakes 32 coroutines, and each reads
its clock late by the work of those woken before it; bytes that arrive meanwhile wait
for the whole pass. So for the duration of a response its connection's protocol is
wrapped: its data_received (the asyncio callback the transport calls with each socket
read) lets aiohttp parse the HTTP framing, then takes the new payload bytes straight out
of the response and hands them to `on_data` with the read's time. The reading coroutine
is not woken per chunk at all; it waits for the end of the response.

The time of a read: on a loop from new_event_loop(), the moment the loop's wait for
sockets returned, since every byte read in that pass was there by then (a clock read in
data_received would add the reads served before it in the same pass, ~25 us each). On
any other asyncio selector loop, perf_counter_ns() in data_received. Where the protocol
cannot be wrapped (another kind of loop, a future aiohttp), the coroutine reads the
response and reads the clock itself.
"""

import asyncio
import selectors
import time


class WakeStampSelector(selectors.DefaultSelector):
    """The loop's selector, noting when each wait for sockets returned (perf_counter_ns)."""

    woke_ns = 0

    def select(self, timeout=None):
        ready = super().select(timeout)
        self.woke_ns = time.perf_counter_ns()
        return ready


def new_event_loop() -> asyncio.AbstractEventLoop:
    """An asyncio loop whose socket reads are stamped when its wait for sockets returned."""
    selector = WakeStampSelector()
    loop = asyncio.SelectorEventLoop(selector)
    loop.decodescope_wake_stamps = selector
    return loop


def _read_clock(clock):
    selector = getattr(asyncio.get_running_loop(), "decodescope_wake_stamps", None)
    return (lambda: selector.woke_ns) if selector is not None else clock


async def read_stamped(resp, on_data, clock=time.perf_counter_ns) -> bool:
    """Hand every payload byte of `resp` to on_data(bytes, t_ns) until the response ends.
    True when the reads were stamped in the protocol callback, False when by the coroutine."""
    content = resp.content
    proto = resp.connection.protocol if resp.connection is not None else None
    # asyncio's own selector transports look data_received up on every read; other loops
    # (uvloop) may keep the bound method, so a wrapper would never be called there
    selector_loop = isinstance(asyncio.get_running_loop(), asyncio.selector_events.BaseSelectorEventLoop)
    if not selector_loop or proto is None or not hasattr(proto, "__dict__") or "data_received" in vars(proto):
        async for data in content.iter_any():  # cannot wrap (or someone else did): coroutine-side clock
            on_data(data, clock())
        return False
    received, read_time = proto.data_received, _read_clock(clock)
    draining = False

    def data_received(data: bytes) -> None:
        nonlocal draining
        if not data or draining:  # aiohttp calls back in (empty) when a drain resumes reading
            return received(data)
        t = read_time()
        received(data)  # aiohttp: HTTP framing, then the payload into `content`
        draining = True
        try:
            _drain(content, on_data, t)
        finally:
            draining = False

    _drain(content, on_data, read_time())  # bytes that came with the headers arrived no later than now
    proto.data_received = data_received
    try:
        await content.wait_eof()
    finally:
        del proto.data_received  # the connection goes back to the pool as it was
    _drain(content, on_data, read_time())
    return True


def _drain(content, on_data, t: int) -> None:
    if content.exception() is not None:
        return  # the payload failed (e.g. a broken chunk): wait_eof raises it in the reader
    data = content.read_nowait(-1)
    if data:
        on_data(data, t)
