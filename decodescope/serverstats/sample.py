"""One server-side statistics sample as a run records it: a log line (through
serverlog.LogRecord) or the difference of two /metrics scrapes, with the time window it
covers. `measure` writes one per line of its run file (measure/watch.py) and reads them
back; `log` reads the same LogRecords from a saved file."""

from dataclasses import dataclass
from enum import StrEnum


class SampleSource(StrEnum):
    LOG = "server_log"  # a statistics line of the server's log
    METRICS = "metrics"  # counters of two /metrics scrapes


@dataclass(frozen=True)
class ServerSample:
    source: SampleSource
    time_s: float  # s since the run started, when the client got the sample
    window_s: float | None  # s the sample covers; None when unknown (a series' first line)
    accept_len: float | None  # tokens per verify round incl. the bonus token
    gen_tok_s: float | None  # generated tokens / s over the window, all requests
    warmup: bool
    data: dict  # the log record (LogRecord.to_dict) or the derived rates
    per_request: bool = False  # a llama.cpp line: one request's own decode, as it finished
    written_s: float | None = None  # per_request: the earliest the line can have been written

    def to_dict(self) -> dict:
        """The run-file line: {"type", "time_s", "window_s", "accept_len", "gen_tok_s",
        "warmup", ["per_request", "written_s"], "data"}."""
        d = {
            "type": self.source.value,
            "time_s": self.time_s,
            "window_s": self.window_s,
            "accept_len": self.accept_len,
            "gen_tok_s": self.gen_tok_s,
            "warmup": self.warmup,
        }
        if self.per_request:
            d["per_request"] = True
            d["written_s"] = self.written_s
        d["data"] = self.data
        return d
