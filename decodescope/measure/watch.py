"""The server's own statistics while a run goes: a tailed log (--server-log) and scraped
Prometheus /metrics (--metrics-url). Each sample becomes one run-file line:

  {"type": "server_log" | "metrics", "time_s": s since run start (when the client got it),
   "window_s": s the sample covers, "accept_len", "gen_tok_s", "warmup", "data": {...}}

A log line's window runs from the previous line of the same kind and rank to this one
(the engines log every N iterations or seconds, not on a clock the client knows); as the
client only sees a line at the poll after it was written, the window is taken wide: from
the poll before the previous line was read to the poll that read this one. A llama.cpp
line is different: it reports one request, printed as that request finished, and its
window is that request's own decode ("per_request": true; "written_s": the poll before
the one that read it, the earliest it can have been written; "window_s": its eval time
before that). A scrape's window is the time since the previous scrape. stats.py uses the
windows to drop samples that straddle idle time or warm-up.
"""

import asyncio
import time
from pathlib import Path

import aiohttp

from decodescope.serverstats import serverlog
from decodescope.serverstats.sample import SampleSource, ServerSample
from decodescope.serverstats.tail import LogTail

TAIL_POLL_S = 0.1  # how late a log line can reach the run file


def sample(kind: str, time_s: float, window_s, accept_len, gen_tok_s, warmup: bool, data: dict, **extra) -> dict:
    """A run-file line: serverstats.sample.ServerSample as a dict."""
    return ServerSample(SampleSource(kind), time_s, window_s, accept_len, gen_tok_s, warmup, data, **extra).to_dict()


class ServerWatch:
    def __init__(self, log_path, metrics_url, interval_s: float, clock_s, on_sample, on_warning=print):
        self.log_path = log_path
        self.tail = None  # opened when the file exists: at start, or when it appears
        self.metrics_url = metrics_url
        self.interval_s = interval_s
        self.clock_s = clock_s  # seconds since the run started
        self.on_sample = on_sample
        self.on_warning = on_warning
        self.engine = None  # locked to the first engine recognised in the log
        self._reader = serverlog.LogReader(())
        self._line_start: dict = {}  # (kind, rank) -> earliest time_s the previous line could have been written
        self._eval_s: dict = {}  # llama.cpp slot -> eval time of its last request, s
        self._last_poll = 0.0
        self._prev = None  # (time_s, parsed metrics) of the previous scrape
        self._scrape_errors = 0
        self._session = None
        self._tasks: list[asyncio.Task] = []

    async def start(self) -> None:
        if self.metrics_url:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=max(5.0, self.interval_s)))
            error = await self._scrape()
            if error:  # the run is worth having without the server's counters
                self._scrape_errors += 1
                self.on_warning(f"warning: cannot scrape {self.metrics_url} ({error}); will keep trying")
            self._tasks.append(asyncio.create_task(self._scrape_loop()))
        if self.log_path:
            if Path(self.log_path).exists():
                self.tail = LogTail(self.log_path)
            else:
                self.on_warning(f"waiting for the server log {self.log_path} to appear")
            self._tasks.append(asyncio.create_task(self._tail_loop()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.tail:
            self._poll_log()  # lines the server wrote as the last requests finished
            self.tail.close()
        if self._session:
            await self._scrape()
            await self._session.close()

    async def _tail_loop(self) -> None:
        while True:
            if self.tail is None and Path(self.log_path).exists():
                self.tail = LogTail(self.log_path, from_start=True)  # new since the run began: all of it
            if self.tail:
                self._poll_log()
            await asyncio.sleep(TAIL_POLL_S)

    def _poll_log(self) -> None:
        t = self.clock_s()
        # a line read now was written after the previous poll: its window is bounded by
        # (when the line before it could first have been written, now]
        written_after, self._last_poll = self._last_poll, t
        for line in self.tail.poll():
            rec = self._reader.record(line)  # one reader: llama.cpp draft counts pair with their eval line
            if rec is None or rec.kind == "startup":
                continue  # not a statistics line: counted by `decodescope log`, ignored here
            self.engine = rec.engine
            if rec.engine == "llamacpp" and rec.kind in ("decode", "spec"):
                self._per_request(rec, t, written_after)
                continue
            key = (rec.kind, rec.rank)
            window = t - self._line_start[key] if key in self._line_start else None
            self._line_start[key] = written_after
            self.on_sample(sample("server_log", t, window, rec.accept_len, rec.gen_tok_s, rec.warmup, rec.to_dict()))

    def _per_request(self, rec, t: float, written_after: float) -> None:
        # the draft line follows its request's eval line: it takes that request's eval time
        if rec.kind == "decode":
            self._eval_s[rec.rank] = rec.fields["time_ms"] / 1e3
        eval_s = self._eval_s.get(rec.rank)
        data = rec.to_dict()
        extra = {"per_request": True, "written_s": written_after}
        self.on_sample(sample("server_log", t, eval_s, rec.accept_len, rec.gen_tok_s, rec.warmup, data, **extra))

    async def _scrape_loop(self) -> None:
        next_t = time.monotonic()
        while True:
            next_t += self.interval_s
            await asyncio.sleep(max(0.0, next_t - time.monotonic()))
            error = await self._scrape()
            if error:
                self._scrape_errors += 1
                if self._scrape_errors == 1:
                    self.on_warning(f"warning: scraping {self.metrics_url} failed ({error}); will keep trying")

    async def _scrape(self) -> str | None:
        from decodescope.serverstats import metrics  # prometheus-client's parser, only when scraping

        try:
            async with self._session.get(self.metrics_url) as resp:
                if resp.status != 200:
                    return f"HTTP {resp.status}"
                text = await resp.text(errors="replace")
        except (TimeoutError, aiohttp.ClientError) as e:
            return repr(e)
        t = self.clock_s()
        cur = metrics.parse_metrics(text, t)
        if self._prev is not None:
            t_prev, prev = self._prev
            d = metrics.derive(prev, cur)
            self.on_sample(sample("metrics", t, t - t_prev, d.get("accept_len"), d.get("gen_tok_s"), False, d))
        self._prev = (t, cur)
        return None
