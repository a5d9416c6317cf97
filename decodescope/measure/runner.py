"""One measure run: warm-up, then every load level x suite in turn, the server watched
throughout, every finished request and server sample appended to the run file, the
summary written last. Ctrl-C stops it cleanly: in-flight requests are recorded as
cancelled and the summary is still written (a second Ctrl-C quits at once)."""

import asyncio
import itertools
import os
import signal
import time
from dataclasses import dataclass, field
from functools import partial

from decodescope.measure import stats
from decodescope.measure.arrival import new_event_loop
from decodescope.measure.client import Endpoint, Job, RequestResult, Sampling, open_session, send_request
from decodescope.measure.load import Load
from decodescope.measure.runfile import RunWriter
from decodescope.measure.suites import Suite
from decodescope.measure.watch import ServerWatch


@dataclass(frozen=True)
class Level:
    concurrency: int | None  # closed loop: requests in flight
    rate: float | None = None  # open loop: Poisson arrivals, requests/s


@dataclass(frozen=True)
class Plan:
    endpoint: Endpoint
    sampling: Sampling
    suites: tuple[Suite, ...]
    levels: tuple[Level, ...]
    requests: int | None = None  # per suite and level; None: each prompt of the suite once
    warmup: int = 1  # requests before the measured ones, recorded with warmup: true
    seed: int = 0  # Poisson arrivals
    server_log: str | None = None
    metrics_url: str | None = None
    metrics_interval_s: float = 1.0
    duration_s: float | None = None  # per suite and level: requests keep starting this long
    slo: dict | None = None  # {"ttft_ms": x, "tpot_ms": y}: goodput counts the requests within

    def phases(self) -> list[tuple[Level, list[Job]]]:
        """Per load level and suite, the jobs: prompts reused round-robin, at least one per
        request in flight (12 prompts at --concurrency 16 run 16 at a time); endless
        (an iterator) with duration_s."""
        out = []
        if self.warmup:
            first = self.suites[0]
            out.append((Level(1), [_job(first, i, Level(1), warmup=True) for i in range(self.warmup)]))
        for level in self.levels:
            for suite in self.suites:
                if self.duration_s:
                    out.append((level, (_job(suite, i, level) for i in itertools.count())))
                    continue
                n = self.requests or max(len(suite.prompts), level.concurrency or 0)
                out.append((level, [_job(suite, i, level) for i in range(n)]))
        return out


def _job(suite: Suite, i: int, level: Level, warmup: bool = False) -> Job:
    k = i % len(suite.prompts)
    return Job(suite.name, k, suite.prompts[k], warmup, level.concurrency, level.rate)


@dataclass
class Outcome:
    requests: list[RequestResult] = field(default_factory=list)
    samples: list[dict] = field(default_factory=list)
    interrupted: bool = False
    stop_signal: int = signal.SIGINT  # the signal that interrupted the run (exit status 128 + it)
    summary: dict = field(default_factory=dict)


def run_loop(coro):
    """Run a coroutine on the loop that stamps socket reads when they happen (arrival.py)."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(coro)


class Runner:
    def __init__(self, plan: Plan, writer: RunWriter, tokenizer=None, on_result=None, on_warning=print):
        self.plan = plan
        self.writer = writer
        self.tokenizer = tokenizer
        self.on_progress = on_result
        self.on_warning = on_warning
        self.out = Outcome()
        self._load: Load | None = None
        self._t0_ns = time.perf_counter_ns()

    def clock_s(self) -> float:
        return (time.perf_counter_ns() - self._t0_ns) / 1e9

    async def run(self) -> Outcome:
        p = self.plan
        watch = ServerWatch(
            p.server_log, p.metrics_url, p.metrics_interval_s, self.clock_s, self._sample, self.on_warning
        )
        await watch.start()
        handled = self._trap_sigint()
        try:
            for level, jobs in p.phases():
                if self.out.interrupted:
                    break
                await self._phase(level, jobs)
        finally:
            for sig in handled:
                asyncio.get_running_loop().remove_signal_handler(sig)
            await watch.stop()
        self.out.summary = stats.summarize(self.out.requests, self.out.samples, self.out.interrupted, p.slo)
        self.writer.write({"type": "summary", **self.out.summary})
        return self.out

    async def _phase(self, level: Level, jobs: list[Job]) -> None:
        p = self.plan
        async with open_session(level.concurrency, p.sampling.timeout_s) as session:
            send = partial(
                send_request, session, p.endpoint, sampling=p.sampling, run_t0_ns=self._t0_ns, tokenizer=self.tokenizer
            )
            self._load = Load(send, self._result)
            duration = None if isinstance(jobs, list) else p.duration_s  # the warm-up is a list
            if level.rate:
                await self._load.poisson(jobs, level.rate, p.seed, duration)
            else:
                await self._load.closed(jobs, level.concurrency, duration)
            self._load = None

    def _result(self, r: RequestResult) -> None:
        self.out.requests.append(r)
        self.writer.request(r)
        if self.on_progress:
            self.on_progress(r)

    def _sample(self, s: dict) -> None:
        self.out.samples.append(s)
        self.writer.write(s)

    def _trap_sigint(self) -> list:
        # SIGTERM (docker stop, kill) ends the run as Ctrl-C does
        try:
            for sig in (signal.SIGINT, signal.SIGTERM):
                asyncio.get_running_loop().add_signal_handler(sig, self._interrupt, sig)
        except (NotImplementedError, RuntimeError, ValueError):
            return []  # not the main thread, or no signals here: Ctrl-C then aborts the usual way
        return [signal.SIGINT, signal.SIGTERM]

    def _interrupt(self, sig: int = signal.SIGINT) -> None:
        if self.out.interrupted:
            os._exit(128 + sig)  # second Ctrl-C: every finished request is already on disk
        self.out.interrupted = True
        self.out.stop_signal = int(sig)
        self.on_warning("interrupted: recording in-flight requests as cancelled (Ctrl-C again quits at once)")
        if self._load:
            self._load.stop()
