"""A trace's median step next to the model's expected decode round, term by term.

Measured kernel classes map to the model's round components (the `breakdown` of
`decodescope model --json`): GEMMs read the weights, attention reads the KV cache, linear
attention reads and writes its state, allreduce is allreduce, and GPU idle is what the
model charges for the host and per-kernel floors. Classes with no model term (norms,
elementwise, copies, sampling, routing, unknown) are shown as "other GPU work".
"""

from decodescope.trace.classify import KernelClass as K

# (row label, trace classes, model components); "idle" is the trace's idle time
TERMS = (
    ("GEMM <-> weights", (K.GEMM, K.MOE_GEMM), ("weights",)),
    ("attention <-> KV cache", (K.ATTENTION,), ("kv_cache",)),
    ("linear attention <-> state", (K.LINEAR_ATTENTION,), ("state",)),
    ("allreduce / collectives <-> allreduce", (K.ALLREDUCE, K.COLLECTIVE), ("allreduce",)),
    ("GPU idle <-> host + kernel floors", ("idle",), ("host", "kernels")),
)


def against_model(trace: dict, prediction: dict) -> dict:
    """`trace`: TraceReport.to_dict(); `prediction`: the model's to_dict(). Times in ms per step."""
    modelled = {c["component"]: c["ms"] for c in prediction["expected"]["breakdown"]}
    by_class = trace["by_class"]
    rows, matched = [], set()
    for label, classes, components in TERMS:
        measured = sum(trace["idle_ms"] or 0.0 if c == "idle" else by_class.get(str(c), 0.0) for c in classes)
        matched.update(str(c) for c in classes)
        model_ms = sum(modelled.get(c, 0.0) for c in components)
        rows.append({"term": label, "measured_ms": measured, "model_ms": model_ms})
    other = sum(v for k, v in by_class.items() if k not in matched)
    unmapped = sum(v for k, v in modelled.items() if k not in {c for t in TERMS for c in t[2]})
    rows.append({"term": "other GPU work <-> other model terms", "measured_ms": other, "model_ms": unmapped})
    rows.append({"term": "step <-> round", "measured_ms": trace["step_ms"]["p50"],
                 "model_ms": prediction["expected"]["round_ms"]})
    return {"model": prediction["model"]["name"], "deployment": prediction["deployment"], "rows": rows}
