"""Chunks are timed when their socket read happened, not when the reading coroutine got
round to them (decodescope/measure/arrival.py): a reader that falls behind still sees
the true gaps. Against the real scripted server, one chunk every 10 ms."""

import asyncio
import statistics
import time

import pytest

from decodescope.measure.arrival import ArrivalClock, new_event_loop
from decodescope.measure.client import open_session
from decodescope.measure.stream import StreamAccumulator

pytestmark = pytest.mark.server


async def late_reader(url: str, lag_s: float):
    """Stream one chat request, sleeping lag_s after each read so that socket reads pile up."""
    body = {
        "model": "tokens=20,interval_ms=10,run=arrival",
        "messages": [{"role": "user", "content": "x"}],
        "stream": True,
    }
    piled = 0
    async with open_session(1, 10) as session:
        async with session.post(url + "/v1/chat/completions", json=body) as resp:
            proto = resp.connection.protocol
            acc = StreamAccumulator("chat", time.perf_counter_ns())
            with ArrivalClock(resp, time.perf_counter_ns) as arrivals:
                wrapped = "data_received" in vars(proto)
                async for data in resp.content.iter_any():
                    pieces = arrivals.pieces(data)
                    piled += len(pieces) > 1
                    for piece, t in pieces:
                        acc.feed(piece, t)
                    await asyncio.sleep(lag_s)
            unwrapped = "data_received" not in vars(proto)
    acc.finish()
    return acc, piled, wrapped, unwrapped


@pytest.mark.parametrize("loop", [None, new_event_loop], ids=["any asyncio loop", "wake-stamping loop"])
def test_a_late_reader_still_gets_each_chunks_own_read_time(scripted_server, loop):
    with asyncio.Runner(loop_factory=loop) as runner:
        acc, piled, wrapped, unwrapped = runner.run(late_reader(scripted_server.url, lag_s=0.035))
    assert wrapped and unwrapped, "wrap the connection's protocol for the response, then give it back as it was"
    assert acc.error_kind is None and len(acc.token_times_ns) == 20
    assert piled >= 3, "the reader must have fallen behind for this test to mean anything"
    gaps_ms = [(b - a) / 1e6 for a, b in zip(acc.token_times_ns, acc.token_times_ns[1:])]
    assert statistics.median(gaps_ms) == pytest.approx(10, abs=2), gaps_ms
    assert sum(g < 3 for g in gaps_ms) <= 2, f"piled-up chunks must not share one time: {gaps_ms}"


def test_the_next_request_on_a_reused_connection_is_timed_too(scripted_server):
    async def two():
        out = []
        async with open_session(1, 10) as session:  # one connection, kept alive between the two
            for _ in range(2):
                body = {"model": "tokens=3,run=reuse", "prompt": "x", "stream": True}
                async with session.post(scripted_server.url + "/v1/completions", json=body) as resp:
                    with ArrivalClock(resp, time.perf_counter_ns) as arrivals:
                        out.append("data_received" in vars(resp.connection.protocol))
                        async for data in resp.content.iter_any():
                            arrivals.pieces(data)
        return out

    assert asyncio.run(two()) == [True, True]
