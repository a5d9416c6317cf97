"""Print the README's accuracy table (markdown) from `decodescope validate`'s figures:
per engine, out of sample (leave one source out) first, in sample second; then, for the
engines whose rows ran on several backends (llama.cpp's ggml backends, SGLang's CUDA and
ROCm builds), the same per backend.

    python benchmarks/accuracy_table.py
"""

from collections import defaultdict

from decodescope.validate.rows import load_cases
from decodescope.validate.run import ErrorStats, validate


def cells(s: ErrorStats | None) -> str:
    if s is None:
        return "n/a | n/a"
    return (f"{s.median_abs:.1%} / {s.mean_abs:.1%} | "
            f"{round(s.within_10 * s.rows)} / {round(s.within_25 * s.rows)} of {s.rows}")


def main() -> None:
    v = validate()
    print("| engine | sources | out of sample: median / mean \\|error\\| | out of sample: within 10 % / 25 % "
          "| in sample: median / mean \\|error\\| | in sample: within 10 % / 25 % |")
    print("|---|---|---|---|---|---|")
    for e in v.engines:
        if e.rows:
            ins = cells(e.in_sample) + ("" if e.fitted_profile else " (estimate, not fitted)")
            print(f"| {e.engine} | {len(e.sources)} | {cells(e.out_of_sample)} | {ins} |")
    print(f"| all | | {cells(v.out_of_sample)} | {cells(v.in_sample)} |")
    by_backend(v)
    print(f"\nrows: {len(v.rows)} run, {len(v.skipped)} skipped; above the ceiling: {', '.join(v.above_ceiling) or 'none'}; "
          f"no rows: {', '.join(e.engine for e in v.engines if not e.rows)}")


def by_backend(v) -> None:
    """Out-of-sample and in-sample figures of each engine's rows per backend they ran on."""
    backend = {c.id: c.deployment.runs_on.value for c in load_cases()[0] if c.deployment.runs_on}
    print("\n| engine | backend | out of sample: median / mean \\|error\\| | out of sample: within 10 % / 25 % "
          "| in sample: median / mean \\|error\\| | in sample: within 10 % / 25 % |")
    print("|---|---|---|---|---|---|")
    for e in v.engines:
        out, ins = defaultdict(list), defaultdict(list)
        for h in e.held_out:
            out[backend.get(h.id)].append(h.error)
        for r in e.rows:
            if r.error is not None:
                ins[backend.get(r.id)].append(r.error)
        if len([b for b in ins if b]) < 2:
            continue
        for b in sorted(b for b in ins if b):
            print(f"| {e.engine} | {b} | {cells(ErrorStats.of(out[b]))} | {cells(ErrorStats.of(ins[b]))} |")


if __name__ == "__main__":
    main()
