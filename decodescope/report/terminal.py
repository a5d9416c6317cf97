"""Terminal rendering of `decodescope model`. Every figure with its unit; the numbers are
the ones in Prediction.to_dict(), only formatted. Plain text tables (no rich): importing
rich would cost this command a quarter of its run time."""

import os
import re
import sys

from decodescope.model.predict import Prediction, hardware_dict

BAR = 24  # characters for the largest component
_STYLE = {"bold": "\033[1m", "red": "\033[31m", "bold red": "\033[1;31m"}


class _Text:
    """Bold / red through ANSI codes when writing to a terminal that wants colour."""

    def __init__(self, color: bool):
        self.color = color

    def __call__(self, style: str, s: str) -> str:
        return f"{_STYLE[style]}{s}\033[0m" if self.color else s


def _table(title: str, headers: list[str], rows: list[list[str]], left: int, split: int | None = None) -> str:
    """A boxed table: the first `left` columns left-aligned, the rest right-aligned; a
    rule before row `split`."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells):
        return "│ " + " │ ".join(c.ljust(w) if i < left or i == len(widths) - 1 and not headers[i] else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths))) + " │"

    def rule(a, b, c):
        return a + b.join("─" * (w + 2) for w in widths) + c

    body = [line(r) if i != split else rule("├", "┼", "┤") + "\n" + line(r) for i, r in enumerate(rows)]
    width = sum(widths) + 3 * len(widths) + 1
    return "\n".join([title.center(width).rstrip(), rule("┌", "┬", "┐"), line(headers), rule("├", "┼", "┤"),
                      *body, rule("└", "┴", "┘")])


def _describe(p: Prediction, t: _Text) -> str:
    d, a = p.deployment, p.arch
    spec = "no speculation" if not d.spec.k else f"{d.spec.method} {d.spec.k} steps, accept_len {d.spec.accept_len:g}"
    if d.spec.topk > 1:
        spec += f", tree of topk {d.spec.topk} verifying {d.spec.tokens_per_verify} tokens"
    par = (f"row split over {d.tp} GPUs" if d.split_rows else f"TP {d.tp}") + (f", PP {d.pp}" if d.pp > 1 else "") \
        + (f", EP {d.ep}" if d.ep > 1 else "")
    return (f"{t('bold', a.name)} ({a.source}): {a.params_total / 1e9:.2f} B params, "
            f"{a.params_active / 1e9:.2f} B active, {a.params_read_per_token / 1e9:.2f} B read per token\n"
            f"{d.gpus} x {d.gpu.name}, {par}, link {d.link.id}; weights {d.weights.name}, KV {d.kv_dtype}; "
            f"batch {d.batch}{' (every request the same token)' if d.same_tokens else ''}, "
            f"context {d.context} tokens; {spec}; engine {d.engine.id}"
            + (f" ({d.runs_on.value} backend)" if d.runs_on else ""))


def _breakdown(p: Prediction) -> str:
    d = p.deployment
    per = (f"per GPU at batch {d.batch}" if d.pp == 1 else
           f"ms: one request's wait over all {d.pp} stages; GB, GFLOP: per GPU (its stage, "
           f"{min(d.pp, d.batch)} micro-batch{'es' if min(d.pp, d.batch) > 1 else ''} of {-(-d.batch // min(d.pp, d.batch))})")
    top = max(c.ms for c in p.expected.breakdown)
    rows = [[c.component, f"{p.ceiling.ms(c.component):.2f}", f"{c.ms:.2f}", f"{c.bytes / 1e9:.3f}",
             f"{c.flops / 1e9:.1f}", "█" * max(1, round(BAR * c.ms / top))] for c in p.expected.breakdown]
    split = len(rows)
    rows += [["round", f"{p.ceiling.round_ms:.2f}", f"{p.expected.round_ms:.2f}", "", "", ""],
             ["tok/s per user", f"{p.ceiling.tok_s:.1f}", f"{p.expected.tok_s:.1f}", "", "", ""],
             ["tok/s total", f"{p.ceiling.tok_s_total:.1f}", f"{p.expected.tok_s_total:.1f}", "", "", ""]]
    return _table(f"one decode round, {per}",
                  ["component", "ceiling ms", "expected ms", "GB / GPU", "GFLOP / GPU", ""], rows, 1, split)


def _levers(p: Prediction) -> str:
    rows = [[x.lever, x.change, f"{x.tok_s:.1f}", f"{x.gain:+.0%}", f"{x.ceiling_tok_s:.1f}",
             "yes" if x.fits else "no"] for x in p.levers]
    return _table("levers (one change each, expected tok/s per user)",
                  ["lever", "change", "tok/s", "gain", "ceiling tok/s", "fits"], rows, 2)


def _facts(p: Prediction, t: _Text) -> str:
    m, cb = p.memory, p.compute_bound_batch
    fit = "fits" if m.fits else t("red", "does NOT fit")
    lines = [f"bound: {t('bold', p.expected.bound)}; weights read per GPU per round: {p.weight_bytes_per_gpu / 1e9:.2f} GB "
             "(the table's weights row); "
             + (f"decode turns compute-bound at batch {cb}" if cb else "never compute-bound below batch 65536"),
             f"memory per GPU (largest stage): {m.total_bytes / 1e9:.1f} GB of {m.usable_bytes / 1e9:.1f} GB usable "
             f"({m.capacity_bytes / 1e9:.0f} GB, engine {p.deployment.engine.id}): {fit}; "
             f"room for {m.max_batch} requests of this context"]
    if not m.fits:
        lines.append(_misfit(p, t))
    h = hardware_dict(p.deployment)
    src, e = h["sources"], p.deployment.engine
    lines.append(f"sources: bandwidth {h['memory_bw_bytes_s'] / 1e9:.0f} GB/s {_ref(src.get('memory_bw_bytes_s'))}"
                 + (f"; allreduce alpha {h['allreduce_latency_s'] * 1e6:.0f} us {_ref(src['allreduce_latency_s'])}"
                    if p.deployment.gpus > 1 else "")
                 + f"; engine {e.id}: {e.source.split(':')[0]} (engines.toml); "
                 "every source in full: --json, `decodescope gpus ID`")
    lines += [f"note: {n}" for n in p.notes]
    return "\n".join(lines)


def _misfit(p: Prediction, t: _Text) -> str:
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
    return f"{t('bold red', 'warning')}: does not fit: {what}; would fit: {would}"


def _ref(source: str | None) -> str:
    """The first URL of a source text, else its first words."""
    if not source:
        return "(no source)"
    m = re.search(r"https?://[^\s'\")]+", source)
    return f"({m[0].rstrip(':,.')})" if m else f"({source[:60]})"


def print_prediction(p: Prediction, out=None) -> None:
    out = out or sys.stdout
    t = _Text(out.isatty() and "NO_COLOR" not in os.environ)
    parts = [_describe(p, t), _breakdown(p), _facts(p, t)] + ([_levers(p)] if p.levers else [])
    out.write("\n".join(parts) + "\n")
