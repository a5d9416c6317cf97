"""What every form of the explain report says, formatted once: the terminal, markdown and
HTML reports render these strings, so a quantity reads the same in each (the JSON has the
unrounded numbers they come from)."""

from decodescope.explain import Explanation, Term
from decodescope.explain.reconcile import TRACE_DISAGREES


def ms(x: float) -> str:
    return f"{x:.2f} ms"


def tok_s(x: float) -> str:
    return f"{x:.1f} tok/s"


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def headline(e: Explanation) -> list[tuple[str, str]]:
    """(quantity, value) rows of the summary table."""
    p, f = e.prediction, e.fit
    rows = [
        ("measured round", f"{ms(f.round_ms)} (points {f.min_ms:.2f}-{f.max_ms:.2f} ms, spread {pct(f.spread)})"),
        ("ceiling round", ms(p.ceiling.round_ms)),
        ("expected round", ms(p.expected.round_ms)),
        ("efficiency (ceiling / measured)", pct(e.efficiency)),
        (f"tok/s per user at accept {e.accept_len:g}",
         f"measured {tok_s(e.measured_tok_s)}, ceiling {tok_s(p.ceiling.tok_s)}, expected {tok_s(p.expected.tok_s)}"),
    ]
    if e.target:
        rows.append((f"accept length for {e.target.tok_s:g} tok/s", f"{e.target.accept_len_needed:.2f}"))
    return rows


def gap_rows(e: Explanation) -> list[tuple[str, str, str, str]]:
    """(term, ms, source, note) from the ceiling up to the measured round."""
    rows = [("ceiling round", ms(e.prediction.ceiling.round_ms), "model", "datasheet bandwidth, no fixed latency")]
    rows += [(t.label, f"{t.ms:+.2f} ms", t.source.value, t.note) for t in e.gap]
    rows.append(("measured round", ms(e.fit.round_ms), "measured", f"{e.fit.points} points"))
    return rows


def lever_rows(e: Explanation) -> list[tuple[str, ...]]:
    """(lever, change, model tok/s, projected tok/s, reaches target, assumption)."""
    def reach(x):
        return "" if x.reaches_target is None else ("yes" if x.reaches_target else "no")
    return [(x.lever, x.change, tok_s(x.model_tok_s), tok_s(x.projected_tok_s), reach(x), x.assumption)
            for x in e.levers]


def verdict(e: Explanation) -> list[str]:
    """The answer in a few sentences."""
    p, f, u = e.prediction, e.fit, e.unexplained
    out = [f"Measured round {ms(f.round_ms)} over {f.points} points: {tok_s(e.measured_tok_s)} per user at "
           f"accept length {e.accept_len:g}; that is {pct(e.efficiency)} of the hardware's ceiling "
           f"({ms(p.ceiling.round_ms)}, {tok_s(p.ceiling.tok_s)})."]
    if not f.shared:
        out.append(f"Warning: the points do not share one round time: their own rounds span "
                   f"{f.min_ms:.2f}-{f.max_ms:.2f} ms, {pct(f.spread)} of the fit; something besides the "
                   "accept length changed between them.")
    t = e.observations.trace
    if t:
        out.append(f"Measured terms from the trace {', '.join(t.files)}: median of {t.steps} decode steps, "
                   f"{ms(t.step_ms)} per step ({100 * e.trace_vs_measured:+.1f} % against the measured round).")
    if e.trace_disagrees:
        out.append(f"Warning: the trace's step ({ms(t.step_ms)}) and the measured round ({ms(f.round_ms)}) differ by "
                   f"more than {pct(TRACE_DISAGREES)}: the trace is of another run or another load.")
    named = sorted((t for t in e.gap if t.term != Term.UNEXPLAINED and t.ms > 0), key=lambda t: -t.ms)[:3]
    out.append(f"The {ms(f.round_ms - p.ceiling.round_ms)} above the ceiling: "
               + ", ".join(f"{t.label} {ms(t.ms)}" for t in named) + f"; unexplained {u.ms:+.2f} ms.")
    if u.ms < 0:
        out.append(f"The model over-predicts: its expected round {ms(p.expected.round_ms)} is "
                   f"{ms(-u.ms)} longer than measured, so some modelled cost is smaller on this server.")
    if e.target:
        t = e.target
        reach = ("within" if t.reachable_by_accept else "beyond")
        levers = ", ".join(t.levers) or "none"
        out.append(f"{tok_s(t.tok_s)} needs accept length {t.accept_len_needed:.2f} at the measured round "
                   f"(today {e.accept_len:g}; {reach} what {p.deployment.spec.k} draft steps allow); levers that "
                   f"reach it at today's accept length: {levers}.")
    return out


def inputs(e: Explanation) -> list[str]:
    """The inputs with their sources."""
    d = e.prediction.deployment
    out = list(e.observations.inputs)
    out += [f"point {p.accept_len:g}:{p.tok_s:g} tok/s ({p.round_ms:.2f} ms) from {'; '.join(p.sources)}"
            for p in e.observations.points]
    out.append(f"model {e.prediction.arch.summary().get('name', '')}; " + deployment_line(e))
    out.append(f"engine profile {d.engine.id}: {d.engine.source}")
    out += list(e.prediction.notes)
    return out


def deployment_line(e: Explanation) -> str:
    d = e.prediction.deployment
    tree = f" tree {d.spec.topk}:{d.spec.tokens_per_verify}" if d.spec.topk > 1 else ""
    spec = f"spec {d.spec.method}:{d.spec.k}{tree}, accept {d.spec.accept_len:g}, " if d.spec.k else "no speculation, "
    split = f"row split over {d.tp} GPUs" if d.split_rows else f"TP {d.tp}"
    return (f"{d.gpus} x {d.gpu.name}, {split}, PP {d.pp}, link {d.link.id}, weights {d.weights.name}, "
            f"batch {d.batch}, context {d.context}, " + spec
            + f"engine {d.engine.id}")
