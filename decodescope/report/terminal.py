"""Rich terminal rendering. Every figure with its unit; the numbers are the ones in
Prediction.to_dict(), only formatted."""

import re

from rich.console import Console
from rich.table import Table

from decodescope.model.predict import Prediction, hardware_dict

BAR = 24  # characters for the largest component


def _describe(p: Prediction) -> str:
    d, a = p.deployment, p.arch
    spec = "no speculation" if not d.spec.k else f"{d.spec.method} {d.spec.k} steps, accept_len {d.spec.accept_len:g}"
    par = f"TP {d.tp}" + (f", PP {d.pp}" if d.pp > 1 else "") + (f", EP {d.ep}" if d.ep > 1 else "")
    return (f"[bold]{a.name}[/] ({a.source}): {a.params_total / 1e9:.2f} B params, "
            f"{a.params_active / 1e9:.2f} B active, {a.params_read_per_token / 1e9:.2f} B read per token\n"
            f"{d.gpus} x {d.gpu.name}, {par}, link {d.link.id}; weights {d.weights.name}, KV {d.kv_dtype}; "
            f"batch {d.batch}, context {d.context} tokens; {spec}; engine {d.engine.id}")


def _breakdown(p: Prediction) -> Table:
    d = p.deployment
    per = (f"per GPU at batch {d.batch}" if d.pp == 1 else
           f"ms: one request's wait over all {d.pp} stages; GB, GFLOP: per GPU (its stage, "
           f"{min(d.pp, d.batch)} micro-batch{'es' if min(d.pp, d.batch) > 1 else ''} of {-(-d.batch // min(d.pp, d.batch))})")
    t = Table(title=f"one decode round, {per}")
    for col in ("component", "ceiling ms", "expected ms", "GB / GPU", "GFLOP / GPU", ""):
        t.add_column(col, justify="left" if col in ("component", "") else "right")
    top = max(c.ms for c in p.expected.breakdown)
    for c in p.expected.breakdown:
        t.add_row(c.component, f"{p.ceiling.ms(c.component):.2f}", f"{c.ms:.2f}", f"{c.bytes / 1e9:.3f}",
                  f"{c.flops / 1e9:.1f}", "█" * max(1, round(BAR * c.ms / top)))
    t.add_section()
    t.add_row("round", f"{p.ceiling.round_ms:.2f}", f"{p.expected.round_ms:.2f}", "", "", "")
    t.add_row("tok/s per user", f"{p.ceiling.tok_s:.1f}", f"{p.expected.tok_s:.1f}", "", "", "")
    t.add_row("tok/s total", f"{p.ceiling.tok_s_total:.1f}", f"{p.expected.tok_s_total:.1f}", "", "", "")
    return t


def _levers(p: Prediction) -> Table:
    t = Table(title="levers (one change each, expected tok/s per user)")
    for col in ("lever", "change", "tok/s", "gain", "ceiling tok/s", "fits"):
        t.add_column(col, justify="left" if col in ("lever", "change") else "right")
    for x in p.levers:
        t.add_row(x.lever, x.change, f"{x.tok_s:.1f}", f"{x.gain:+.0%}", f"{x.ceiling_tok_s:.1f}",
                  "yes" if x.fits else "[red]no[/]")
    return t


def _facts(p: Prediction) -> str:
    m, cb = p.memory, p.compute_bound_batch
    fit = "fits" if m.fits else "[red]does NOT fit[/]"
    lines = [f"bound: [bold]{p.expected.bound}[/]; weights read per GPU per round: {p.weight_bytes_per_gpu / 1e9:.2f} GB "
             "(the table's weights row); "
             + (f"decode turns compute-bound at batch {cb}" if cb else "never compute-bound below batch 65536"),
             f"memory per GPU (largest stage): {m.total_bytes / 1e9:.1f} GB of {m.usable_bytes / 1e9:.1f} GB usable "
             f"({m.capacity_bytes / 1e9:.0f} GB, engine {p.deployment.engine.id}): {fit}; "
             f"room for {m.max_batch} requests of this context"]
    if not m.fits:
        lines.append(_misfit(p))
    h = hardware_dict(p.deployment)
    src, e = h["sources"], p.deployment.engine
    lines.append(f"sources: bandwidth {h['memory_bw_bytes_s'] / 1e9:.0f} GB/s {_ref(src.get('memory_bw_bytes_s'))}"
                 + (f"; allreduce alpha {h['allreduce_latency_s'] * 1e6:.0f} us {_ref(src['allreduce_latency_s'])}"
                    if p.deployment.gpus > 1 else "")
                 + f"; engine {e.id}: {e.source.split(':')[0]} (engines.toml); "
                 "every source in full: --json, `decodescope gpus ID`")
    lines += [f"note: {n}" for n in p.notes]
    return "\n".join(lines)


def _misfit(p: Prediction) -> str:
    """The warning line: what does not fit, and which single changes would."""
    m, d = p.memory, p.deployment
    gb = 1e9
    left = (m.usable_bytes - m.weights_bytes) / gb
    one = (m.kv_cache_bytes + m.state_bytes) / d.batch / gb
    what = {
        "weights": f"the weights alone need {m.weights_bytes / gb:.1f} GB per GPU, {m.usable_bytes / gb:.1f} GB usable",
        "kv": f"the weights fit ({m.weights_bytes / gb:.1f} GB per GPU), but one request's KV cache and state at "
              f"context {d.context} need {one:.1f} GB, {left:.1f} GB left",
        "batch": f"KV cache and state of {d.batch} requests at context {d.context} need "
                 f"{(m.kv_cache_bytes + m.state_bytes) / gb:.1f} GB per GPU, {left:.1f} GB left beside the weights",
    }[m.short_of]
    would = ", ".join(p.would_fit) if p.would_fit else "none of --batch, --kv fp8, smaller weights, 16x the GPUs"
    return f"[bold red]warning[/]: does not fit: {what}; would fit: {would}"


def _ref(source: str | None) -> str:
    """The first URL of a source text, else its first words."""
    if not source:
        return "(no source)"
    m = re.search(r"https?://[^\s'\")]+", source)
    return f"({m[0].rstrip(':,.')})" if m else f"({source[:60]})"


def print_prediction(p: Prediction, console: Console | None = None) -> None:
    c = console or Console()
    c.print(_describe(p))
    c.print(_breakdown(p))
    c.print(_facts(p))
    if p.levers:
        c.print(_levers(p))
