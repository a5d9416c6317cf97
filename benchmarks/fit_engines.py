"""Fit an engine profile's free parameters to the published rows of that engine
(data/public.csv via data/deployments.csv) and print the values to put in
decodescope/model/engines.toml. Coordinate search on a log grid; the objective is the
mean |log(expected / measured)| (robust to one bad row, and symmetric).

    python benchmarks/fit_engines.py ENGINE [PARAM ...] [--holdout odd|even]

--holdout fits on every other row of the engine and prints the error on the rows held
out (a two-fold check of how well the fitted profile carries to rows it has not seen).
"""

import csv
import math
import statistics
import sys
from dataclasses import replace

import validate
from decodescope.model import engines as engines_mod

# parameter -> (low, high); format_efficiency.* and memory_efficiency.* allowed
# efficiencies stay below 0.92 of datasheet (no engine streams memory faster in practice)
BOUNDS = {"bw_efficiency": (0.3, 0.92), "kernel_floor_us": (0.0, 12.0), "host_ms_per_pass": (0.0, 8.0),
          "host_ms_per_draft_step": (0.0, 12.0), "allreduce_latency_scale": (0.5, 6.0)}
FORMAT_BOUNDS = (0.3, 1.0)  # format_efficiency.*: relative to bf16; memory_efficiency.*: like bw_efficiency
MEMORY_BOUNDS = (0.3, 0.92)


def _set(profile, name, value):
    if "." in name:
        group, key = name.split(".")
        return replace(profile, **{group: {**getattr(profile, group), key: value}})
    return replace(profile, **{name: value})


def _get(profile, name):
    if "." in name:
        group, key = name.split(".")
        return getattr(profile, group).get(key, 1.0 if group == "format_efficiency" else profile.bw_efficiency)
    return getattr(profile, name)


def objective(engine_id, profile, rows) -> float:
    engines_mod.engines()[engine_id] = profile  # the cached dict: predictions read it by id
    errs = []
    for pub, dep in rows:
        r = validate.run_row(pub, dep)
        if r.expected is not None:
            errs.append(abs(math.log(r.expected / r.measured)))
    return statistics.fmean(errs)


def fit(engine_id, params, rows, sweeps=4):
    profile = engines_mod.engines()[engine_id]
    best = objective(engine_id, profile, rows)
    for _ in range(sweeps):
        for name in params:
            lo, hi = BOUNDS.get(name, MEMORY_BOUNDS if name.startswith("memory") else FORMAT_BOUNDS)
            for v in [lo + (hi - lo) * i / 24 for i in range(25)]:
                cand = _set(profile, name, v)
                score = objective(engine_id, cand, rows)
                if score < best - 1e-9:
                    best, profile = score, cand
    engines_mod.engines()[engine_id] = profile
    return profile, best


def main():
    engine_id = sys.argv[1]
    holdout = sys.argv[sys.argv.index("--holdout") + 1] if "--holdout" in sys.argv else None
    params = [a for a in sys.argv[2:] if not a.startswith("--") and a not in ("odd", "even")] or list(BOUNDS)
    pubs = {r["id"]: r for r in csv.DictReader(open(validate.DATA / "public.csv"))}
    rows = [(pubs[d["id"]], d) for d in csv.DictReader(open(validate.DATA / "deployments.csv"))
            if d["engine"] == engine_id]
    held = []
    if holdout:
        held = rows[holdout == "odd"::2]
        rows = rows[holdout != "odd"::2]
    print(f"{engine_id}: {len(rows)} rows; start mean |log err| "
          f"{objective(engine_id, engines_mod.engines()[engine_id], rows):.3f}")
    profile, score = fit(engine_id, params, rows)
    print(f"fitted mean |log err| {score:.3f}")
    for name in params:
        print(f"  {name} = {_get(profile, name):.3g}")
    for label, group in (("fitted", rows), ("held out", held)):
        for pub, dep in group:
            r = validate.run_row(pub, dep)
            print(f"  {label:8s} {r.id:9s} measured {r.measured:7.1f} expected "
                  + (f"{r.expected:7.1f} {r.error:+.1%}" if r.expected is not None else "n/a"))


if __name__ == "__main__":
    main()
