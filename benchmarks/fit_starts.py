"""Does the fit behind `decodescope validate` depend on where it starts? For every engine
and every leave-one-source-out fold, fit the other sources' rows from the neutral start
and from STARTS more points spread over the parameter ranges (a Halton sequence), and print
the spread of the training loss and of the held-out rows' median |error|. A loss spread
near 0 means the search found the same optimum from every start; a held-out spread with
no loss spread means a parameter the training rows do not see (it keeps its start).

    python benchmarks/fit_starts.py [--engine E] [--starts N]
"""

import argparse
import statistics

from decodescope.model.engines import engines
from decodescope.validate.fit import Sample, bounds, candidate_params, fit, neutral, objective, value
from decodescope.validate.rows import load_cases

PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97)


def halton(i: int, base: int) -> float:
    """The i-th point of the van der Corput sequence in `base` (0 < x < 1 for i > 0)."""
    x, f = 0.0, 1.0
    while i:
        f /= base
        x += f * (i % base)
        i //= base
    return x


def starts(params: list[str], neutral_start: dict[str, float], n: int) -> list[dict[str, float]]:
    """The neutral start, then n points inside 10..90 % of every parameter's range."""
    spread = [{p: bounds(p)[0] + (0.1 + 0.8 * halton(i, PRIMES[j % len(PRIMES)])) * (bounds(p)[1] - bounds(p)[0])
               for j, p in enumerate(params)} for i in range(1, n + 1)]
    return [neutral_start] + spread


def engine_folds(engine: str, n: int) -> list[tuple[str, float, float]]:
    """(held-out source, loss spread, held-out median |error| spread) per fold."""
    cases = [c for c in load_cases()[0] if c.engine == engine and c.comparable]
    params = candidate_params(engine, cases)
    start = neutral(engines()[engine], params)
    samples = [Sample.of(c, start, params) for c in cases]
    params = [p for p in params if any(p in s.linear.params for s in samples)]
    v0 = {p: value(start, p) for p in params}
    out = []
    for source in sorted({s.source for s in samples}):
        train = [s for s in samples if s.source != source]
        test = [s for s in samples if s.source == source]
        losses, medians = [], []
        for s0 in starts(params, v0, n):
            v = v0 | fit(train, s0)
            losses.append(objective(train, v))
            medians.append(statistics.median(abs(s.tok_s(v) / s.measured - 1) for s in test))
        out.append((source, max(losses) - min(losses), max(medians) - min(medians)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--engine", help="one engine profile (default: every one with rows from two sources)")
    ap.add_argument("--starts", type=int, default=5, help="starts besides the neutral one (default 5)")
    args = ap.parse_args()
    names = [args.engine] if args.engine else list(engines())
    print("| engine | source held out | training loss spread | held-out median |error| spread |")
    print("|---|---|---|---|")
    for name in names:
        if len({c.source for c in load_cases()[0] if c.engine == name and c.comparable}) < 2:
            continue
        for source, loss, median in engine_folds(name, args.starts):
            print(f"| {name} | {source} | {loss:.5f} | {median:.1%} |")


if __name__ == "__main__":
    main()
