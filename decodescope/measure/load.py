"""Load generation: a closed loop at fixed concurrency, or open-loop Poisson arrivals.

stop() (Ctrl-C) launches nothing more and cancels what is in flight; each cancelled
request still comes back from send() as a failed result and reaches on_result, so the
run file keeps it.
"""

import asyncio
import random
import time
from collections.abc import Awaitable, Callable

from decodescope.measure.client import Job, RequestResult


class Load:
    def __init__(self, send: Callable[[Job], Awaitable[RequestResult]], on_result: Callable[[RequestResult], None]):
        self.send = send
        self.on_result = on_result
        self.stopped = False
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()

    def stop(self) -> None:
        self.stopped = True
        self._stop.set()
        for t in self._tasks:
            t.cancel()

    async def closed(self, jobs, concurrency: int, duration_s: float | None = None) -> None:
        """concurrency requests in flight; each finished one starts the next job. With
        duration_s, jobs is endless and no job starts after that many seconds."""
        pending = iter(jobs)  # shared by the workers: each next() hands out a distinct job
        end = time.monotonic() + duration_s if duration_s else None

        async def worker():
            for job in pending:
                if self.stopped or (end and time.monotonic() >= end):
                    return
                self.on_result(await self.send(job))

        workers = concurrency if duration_s else min(concurrency, len(jobs))
        await self._join([worker() for _ in range(workers)])

    async def poisson(self, jobs, rate: float, seed: int, duration_s: float | None = None) -> None:
        """Arrivals at `rate` requests/s with exponential gaps (seeded), on an absolute
        schedule; with duration_s, none after that many seconds."""
        rng = random.Random(seed)
        t0, at, started = time.monotonic(), 0.0, []

        async def one(job):
            self.on_result(await self.send(job))

        for i, job in enumerate(jobs):
            if i:
                at += rng.expovariate(rate)
            if (duration_s and at >= duration_s) or await self._sleep_until(t0 + at):
                break
            started.append(self._spawn(one(job)))
        await asyncio.gather(*started)

    async def _join(self, coros) -> None:
        await asyncio.gather(*(self._spawn(c) for c in coros))

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _sleep_until(self, t: float) -> bool:
        # True when stop() came first
        try:
            await asyncio.wait_for(self._stop.wait(), max(0.0, t - time.monotonic()))
        except TimeoutError:
            pass
        return self.stopped
