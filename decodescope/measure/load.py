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

    async def closed(self, jobs: list[Job], concurrency: int) -> None:
        """concurrency requests in flight; each finished one starts the next job."""
        pending = iter(jobs)  # shared by the workers: each next() hands out a distinct job

        async def worker():
            for job in pending:
                if self.stopped:
                    return
                self.on_result(await self.send(job))

        await self._join([worker() for _ in range(min(concurrency, len(jobs)))])

    async def poisson(self, jobs: list[Job], rate: float, seed: int) -> None:
        """Arrivals at `rate` requests/s with exponential gaps (seeded), on an absolute schedule."""
        rng = random.Random(seed)
        t0, at, started = time.monotonic(), 0.0, []

        async def one(job):
            self.on_result(await self.send(job))

        for i, job in enumerate(jobs):
            if i:
                at += rng.expovariate(rate)
            if await self._sleep_until(t0 + at):
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
