"""The explain report's plots as inline SVG (matplotlib, imported only here). No user
text goes into a plot: names and sources stay in the escaped HTML around them."""

import io

from decodescope.explain import Explanation, Term

COLORS = {"weights": "#4c72b0", "kv_cache": "#8172b3", "state": "#64b5cd", "allreduce": "#dd8452",
          "kernels": "#937860", "draft": "#55a868", "host": "#c44e52"}
GAP_COLORS = {Term.BANDWIDTH: "#9ecae1", Term.KERNEL_FLOORS: "#bcbd22", Term.ALLREDUCE: "#fdae6b",
              Term.HOST: "#e377c2", Term.IDLE: "#c5b0d5", Term.CUDA_GRAPHS_OFF: "#7f7f7f", Term.PREFILL: "#17becf",
              Term.UNEXPLAINED: "#d62728"}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"svg.fonttype": "path", "svg.hashsalt": "decodescope", "font.size": 9})
    return plt


def _svg(fig) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    _plt().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE to inline it


def round_breakdown(e: Explanation) -> str:
    """Ceiling and expected stacked by model component; measured = the ceiling plus the
    gap terms stacked. When the model over-predicts (unexplained < 0) the terms reach above
    the measured round: that overshoot is drawn hatched and empty."""
    plt = _plt()
    p = e.prediction
    fig, ax = plt.subplots(figsize=(7, 4))
    for x, est in ((0, p.ceiling), (1, p.expected)):
        bottom = 0.0
        for c in est.breakdown:
            ax.bar(x, c.ms, bottom=bottom, color=COLORS.get(c.component, "#999"), width=0.6,
                   label=c.component if x == 0 else None)
            bottom += c.ms
    ax.bar(2, p.ceiling.round_ms, color="#cccccc", width=0.6, label="ceiling round")
    bottom = p.ceiling.round_ms
    for t in e.gap:
        if t.ms > 0:
            ax.bar(2, t.ms, bottom=bottom, color=GAP_COLORS[t.term], width=0.6, label=t.label,
                   hatch="//" if t.term == Term.UNEXPLAINED else None)
            bottom += t.ms
    u = e.unexplained.ms
    if u < 0:
        ax.bar(2, -u, bottom=e.fit.round_ms, fill=False, hatch="xx", edgecolor=GAP_COLORS[Term.UNEXPLAINED],
               width=0.6, label=f"model over-predicts {-u:.2f} ms")
    ax.axhline(e.fit.round_ms, color="black", lw=1, ls="--", label=f"measured {e.fit.round_ms:.2f} ms")
    for x, v in ((0, p.ceiling.round_ms), (1, p.expected.round_ms), (2, max(e.fit.round_ms, e.fit.round_ms - u))):
        ax.text(x, v, f"{e.fit.round_ms if x == 2 else v:.2f} ms", ha="center", va="bottom")
    ax.set_xticks([0, 1, 2], ["ceiling", "expected (model)", "measured"])
    ax.set_ylabel("ms per decode round")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return _svg(fig)


def tok_s_vs_accept(e: Explanation) -> str:
    plt = _plt()
    p = e.prediction
    pts = e.observations.points
    k = p.deployment.spec.k
    hi = max([k + 1.0, *(q.accept_len for q in pts)] + ([e.target.accept_len_needed] if e.target else []))
    xs = [1.0, hi]
    fig, ax = plt.subplots(figsize=(7, 4))
    for round_ms, style, label in ((p.ceiling.round_ms, ":", "ceiling"), (p.expected.round_ms, "-.", "expected"),
                                   (e.fit.round_ms, "-", "fit to the points")):
        ax.plot(xs, [1000 * x / round_ms for x in xs], style, label=f"{label}: {round_ms:.2f} ms per round")
    ax.scatter([q.accept_len for q in pts], [q.tok_s for q in pts], color="black", zorder=3, label="measured points")
    if e.target:
        ax.axhline(e.target.tok_s, color="#d62728", lw=1, label=f"target {e.target.tok_s:g} tok/s")
        ax.axvline(e.target.accept_len_needed, color="#d62728", lw=1, ls="--",
                   label=f"accept {e.target.accept_len_needed:.2f} needed")
    ax.set_xlabel("accept length (tokens per round)")
    ax.set_ylabel("tok/s per user")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _svg(fig)


def levers(e: Explanation) -> str | None:
    if not e.levers:
        return None
    plt = _plt()
    ls = list(reversed(e.levers))
    fig, ax = plt.subplots(figsize=(7, 0.4 * len(ls) + 1.2))
    ax.barh(range(len(ls)), [x.projected_tok_s for x in ls], color="#55a868")
    ax.set_yticks(range(len(ls)), [f"lever {i}" for i in range(len(ls), 0, -1)])
    ax.axvline(e.measured_tok_s, color="black", ls="--", lw=1, label=f"today {e.measured_tok_s:.1f} tok/s")
    if e.target:
        ax.axvline(e.target.tok_s, color="#d62728", lw=1, label=f"target {e.target.tok_s:g} tok/s")
    for i, x in enumerate(ls):
        ax.text(x.projected_tok_s, i, f" {x.projected_tok_s:.1f}", va="center", fontsize=7)
    ax.set_xlabel("projected tok/s per user at today's accept length")
    ax.legend(fontsize=7, loc="lower right")
    return _svg(fig)
