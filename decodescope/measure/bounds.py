"""The client's own limits on one request, whatever the transport does.

aiohttp's read timeout is not enough: after a malformed chunk-size line mid-body it
stops reading and never times out, and a server that streams without end never goes
silent. So each attempt runs under a deadline of its own, and stops as soon as its
stream has failed (a malformed, oversized or overlong stream is not read to its end).
"""

import asyncio

# The slowest decode a request may run at before the deadline fails it, tok/s. With the
# default --max-tokens 256 and --timeout 60 s: 60 + 256 / 2 = 188 s per request.
FLOOR_TOK_S = 2.0


def request_deadline_s(max_tokens: int | None, timeout_s: float, request_timeout_s: float | None) -> float:
    """--request-timeout when given, else --timeout (queueing and prefill) plus max_tokens at FLOOR_TOK_S."""
    if request_timeout_s:
        return request_timeout_s
    return timeout_s + (max_tokens or 0) / FLOOR_TOK_S


class Guard:
    """Stops the current task's attempt at its deadline, or once its stream has failed.
    The attempt sees a cancellation; the reason was recorded first, so it stands."""

    def __init__(self, acc, deadline_s: float):
        self.acc = acc
        self._task = asyncio.current_task()
        self._stopped = False
        self._closed = False  # the attempt is over: a late stop must not cancel what follows
        self._timer = asyncio.get_running_loop().call_later(deadline_s, self._expire, deadline_s)

    def feed(self, data: bytes, t_ns: int) -> None:
        self.acc.feed(data, t_ns)
        if self.acc.error_kind is not None:
            self._stop()

    def close(self) -> None:
        self._closed = True
        self._timer.cancel()

    def _expire(self, deadline_s: float) -> None:
        self.acc.fail("deadline", f"not finished after {deadline_s:g} s (--request-timeout)")
        self._stop()

    def _stop(self) -> None:
        # from the loop, not from inside feed: the attempt may be about to end on its own,
        # and a cancel that lands after it would cancel the caller instead
        if not self._stopped:
            self._stopped = True
            asyncio.get_running_loop().call_soon(self._cancel)

    def _cancel(self) -> None:
        if not self._closed:
            self._task.cancel()
