"""Arrival times of a streamed response, stamped at the socket read rather than when the
reading coroutine gets to run.

With 32 streams, one decode step on the server sends 32 chunks at once; one event-loop
pass then reads 32 sockets and wakes 32 coroutines, and the last one would read its
clock late by the parsing of the 31 before it (about 2 ms at 60 us each). So the
response's connection protocol is wrapped for the duration of the response: its
data_received (the asyncio callback the transport calls with each socket read) stamps
the read before handing the bytes on, and notes how many payload bytes the response had
after that read. The reading coroutine then cuts what it reads at those byte counts and
gives each piece its own read's time.

The stamp itself: on a loop from new_event_loop(), the moment the loop's wait for
sockets returned, since every byte read in that loop pass was there by then (reading the
clock in data_received would add the reads of the sockets served before it in the same
pass, ~25 us each). On any other loop, perf_counter_ns() in data_received. Where a
connection has no protocol to wrap (a future aiohttp), the coroutine's own clock read.
"""

import asyncio
import selectors
import time
from collections import deque


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


class ArrivalClock:
    def __init__(self, resp, clock):
        self._content = resp.content
        self._clock = clock
        self._proto = resp.connection.protocol if resp.connection is not None else None
        self._stamps: deque = deque()  # (payload bytes received after the read, t_ns of the read)
        self._read = 0  # payload bytes handed to the caller so far
        self._installed = False

    def __enter__(self) -> "ArrivalClock":
        proto = self._proto
        if proto is None or not hasattr(proto, "__dict__") or "data_received" in vars(proto):
            return self  # cannot wrap (or someone else already did): coroutine-side clock
        # bytes that came in with the headers arrived no later than now
        self._stamps.append((self._content.total_bytes, self._clock()))
        received = proto.data_received
        clock, content, stamps = _read_clock(self._clock), self._content, self._stamps

        def data_received(data: bytes) -> None:
            if not data:  # aiohttp calls it empty when it resumes reading: no arrival
                return received(data)
            t = clock()
            received(data)
            stamps.append((content.total_bytes, t))

        proto.data_received = data_received
        self._installed = True
        return self

    def __exit__(self, *exc) -> None:
        if self._installed:
            del self._proto.data_received  # the connection goes back to the pool as it was
            self._installed = False

    def pieces(self, data: bytes) -> list[tuple[bytes, int]]:
        """`data` as read from the stream, cut where socket reads ended, each piece with its read's time."""
        start = pos = self._read
        end = self._read = start + len(data)
        out = []
        while pos < end:
            while self._stamps and self._stamps[0][0] <= pos:
                self._stamps.popleft()  # reads whose bytes were all handed out already
            if not self._stamps:
                out.append((data[pos - start :], self._clock()))
                break
            upto, t = self._stamps[0]
            cut = min(upto, end)
            out.append((data[pos - start : cut - start], t))
            pos = cut
        return out
