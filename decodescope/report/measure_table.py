"""Terminal rendering of a measure summary: one rich table per suite and load level."""

from rich.console import Console
from rich.markup import escape
from rich.table import Table

ROWS = (  # summary key, label with its unit
    ("ttft_ms", "TTFT (ms)"),
    ("itl_ms", "inter-chunk gap (ms)"),
    ("decode_tok_s", "decode per request (tok/s)"),
    ("tpot_ms", "TPOT (ms)"),
    ("latency_ms", "end-to-end latency (ms)"),
    ("output_tokens", "output (tokens)"),
    ("tokens_per_chunk", "chunk (tokens)"),
    ("accept_len", "server accept len (tokens/round)"),
    ("server_gen_tok_s", "server gen throughput (tok/s)"),
    ("server_decode_tok_s", "server decode per request (tok/s)"),
)
COLUMNS = ("mean", "p50", "p90", "p99")


def print_summary(summary: dict, run_file: str, console: Console | None = None) -> None:
    console = console or Console()
    for g in summary["suites"]:
        console.print(_table(g))
        console.print(_footer(g), highlight=False)
    if len({(g.get("concurrency"), g.get("rate")) for g in summary["suites"]}) > 1:
        console.print(_sweep(summary["suites"]))
    if summary.get("interrupted"):
        console.print("[yellow]interrupted: the summary covers the requests that finished[/yellow]")
    console.print(f"run file: {run_file}", highlight=False)


def _table(g: dict) -> Table:
    level = f"rate {g['rate']:g} req/s" if g.get("rate") else f"concurrency {g['concurrency']}"
    title = f"{g['name']} — {level} — {g['requests_ok']} ok, {g['requests_failed']} failed"
    t = Table(title=title, title_justify="left")
    t.add_column("metric (unit)")
    for c in (*COLUMNS, "n"):
        t.add_column(c, justify="right")
    for key, label in ROWS:
        d = g.get(key)
        if d and d.get("n"):
            src = d.get("source")
            source = f" [{src if isinstance(src, str) else ', '.join(src)}]" if src else ""
            t.add_row(escape(label + source), *(_fmt(d[c]) for c in COLUMNS), str(d["n"]))
    return t


SWEEP = (  # column (unit), summary key, statistic
    ("decode\np50\n(tok/s)", "decode_tok_s", "p50"),
    ("all\nstreams\n(tok/s)", "output_throughput", None),
    ("TTFT\np50\n(ms)", "ttft_ms", "p50"),
    ("gap\np99\n(ms)", "itl_ms", "p99"),
    ("accept\nlen\n(tok)", "accept_len", "mean"),
    ("round\n(ms)", "round_ms", None),
)


def _sweep(groups: list[dict]) -> Table:
    """One row per suite and load level, a suite's levels together: how decode moves with load."""
    title = "sweep (c: requests in flight, r: requests/s; accept len: the server's tokens per round)"
    t = Table(title=title, title_justify="left")
    t.add_column("suite", no_wrap=True)
    t.add_column("load", no_wrap=True)
    for label, _, _ in SWEEP:
        t.add_column(label, justify="right", no_wrap=True)
    names = list(dict.fromkeys(g["name"] for g in groups))
    for g in sorted(groups, key=lambda g: names.index(g["name"])):  # stable: levels stay in run order
        load = f"r={g['rate']:g}" if g.get("rate") else f"c={g['concurrency']}"
        t.add_row(g["name"], load, *(_fmt(_stat(g.get(key), stat)) for _, key, stat in SWEEP))
    return t


def _stat(d, stat):
    if stat is None or d is None:
        return d
    return d.get(stat) if d.get("n") else None


def _footer(g: dict) -> str:
    parts = []
    if g.get("output_throughput") is not None:
        parts.append(
            f"all streams {g['output_throughput']:.1f} tok/s, {g['request_throughput']:.2f} req/s"
            + (f", goodput {g['goodput']:.2f} req/s" if g.get("goodput") is not None else "")
        )
    if g.get("client_accept_len") is not None:
        parts.append(
            f"chunks as rounds (client): {g['client_accept_len']:.2f} tokens/chunk after the first, "
            f"median gap {g['client_round_ms']:.1f} ms"
        )
    if g.get("round_ms") is not None:
        parts.append(
            f"round {g['round_ms']:.1f} ms = server accept len {g['accept_len']['mean']:.2f} tokens/round"
            f" / client decode p50 {g['decode_tok_s']['p50']:.1f} tok/s"
        )
    if g.get("token_count_source"):
        parts.append(f"counted by {', '.join(g['token_count_source'])}")
    if g.get("resent"):
        parts.append(f"{g['resent']} resent on a new connection (the server had closed the pooled one)")
    if g.get("errors"):
        parts.append("failed: " + ", ".join(f"{k} {v}" for k, v in g["errors"].items()))
    return "  " + " · ".join(parts)


def _fmt(x) -> str:
    if x is None:
        return "-"
    return f"{x:#.3g}" if abs(x) < 10 else f"{x:.1f}"
