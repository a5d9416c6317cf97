"""Print the README's accuracy table (markdown) from `decodescope validate`'s figures:
per engine, out of sample (leave one source out) first, in sample second.

    python benchmarks/accuracy_table.py
"""

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
    print(f"\nrows: {len(v.rows)} run, {len(v.skipped)} skipped; above the ceiling: {', '.join(v.above_ceiling) or 'none'}; "
          f"no rows: {', '.join(e.engine for e in v.engines if not e.rows)}")


if __name__ == "__main__":
    main()
