"""Run the decode model over the published measurements (data/public.csv, deployments
mapped in data/deployments.csv) and print, per row and in total, the error of the
`expected` estimate and whether the measurement beats the `ceiling`.

    python benchmarks/validate.py [--json]
"""

import csv
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

from decodescope.arch import load_arch
from decodescope.model import make_deployment, parse_format, predict

DATA = Path(__file__).resolve().parent.parent / "decodescope" / "validate" / "data"


@dataclass(frozen=True)
class Row:
    id: str
    engine: str
    gpu: str
    measured: float  # tok/s as published
    expected: float | None  # None where the source gives no accept_len
    ceiling: float
    note: str

    @property
    def error(self) -> float | None:
        return None if self.expected is None else self.expected / self.measured - 1

    @property
    def above_ceiling(self) -> bool:
        return self.measured > self.ceiling


def _model(name: str) -> str:
    return str(DATA / name) if name.endswith(".json") else name


def run_row(pub: dict, dep: dict) -> Row:
    arch = load_arch(_model(dep["model"]))
    k = int(dep["spec"].split(":")[1]) if ":" in dep["spec"] else 0
    accept = float(dep["accept"]) if dep["accept"] else (k + 1 if k else None)  # unknown: the bound
    d = make_deployment(arch, dep["gpu"], tp=int(dep["tp"]), pp=int(dep["pp"]), weights=dep["weights"] or None,
                        kv=dep["kv"], batch=int(dep["batch"]), context=int(dep["context"]), spec=dep["spec"],
                        accept=accept, engine=dep["engine"], link=dep["link"] or None,
                        draft=load_arch(_model(dep["draft"])) if dep["draft"] else None)
    if dep["draft_weights"]:
        from dataclasses import replace
        d = replace(d, draft_weights=parse_format(dep["draft_weights"]))
    p = predict(arch, d)
    total = dep["compare"] == "total"
    exp = p.expected.tok_s_total if total else p.expected.tok_s
    ceil = p.ceiling.tok_s_total if total else p.ceiling.tok_s
    known = bool(dep["accept"]) or not k
    return Row(pub["id"], dep["engine"], dep["gpu"], float(pub["value"]), exp if known else None, ceil, dep["note"])


def run_all() -> list[Row]:
    pubs = {r["id"]: r for r in csv.DictReader(open(DATA / "public.csv"))}
    return [run_row(pubs[d["id"]], d) for d in csv.DictReader(open(DATA / "deployments.csv"))]


def summary(rows: list[Row]) -> dict:
    errs = [abs(r.error) for r in rows if r.error is not None]
    return {"rows": len(rows), "rows_with_expected": len(errs),
            "median_abs_error": statistics.median(errs), "mean_abs_error": statistics.fmean(errs),
            "max_abs_error": max(errs), "within_10pct": sum(e <= 0.10 for e in errs),
            "within_15pct": sum(e <= 0.15 for e in errs),
            "above_ceiling": [r.id for r in rows if r.above_ceiling]}


def main() -> None:
    rows = run_all()
    s = summary(rows)
    if "--json" in sys.argv:
        print(json.dumps({"rows": [r.__dict__ | {"error": r.error} for r in rows], "summary": s}, indent=1))
        return
    print(f"{'id':9s} {'engine':9s} {'gpu':15s} {'measured':>9s} {'expected':>9s} {'error':>7s} {'ceiling':>8s}  note")
    for r in rows:
        exp = f"{r.expected:9.1f}" if r.expected is not None else f"{'n/a':>9s}"
        err = f"{r.error:+7.1%}" if r.error is not None else f"{'':>7s}"
        flag = "  ABOVE CEILING" if r.above_ceiling else ""
        print(f"{r.id:9s} {r.engine:9s} {r.gpu:15s} {r.measured:9.1f} {exp} {err} {r.ceiling:8.1f}{flag}  {r.note}")
    print(f"\n{s['rows']} rows, {s['rows_with_expected']} with an expected value (tok/s): "
          f"median |error| {s['median_abs_error']:.1%}, mean {s['mean_abs_error']:.1%}, max {s['max_abs_error']:.1%}; "
          f"{s['within_10pct']} within 10 %, {s['within_15pct']} within 15 %; "
          f"rows above the ceiling: {', '.join(s['above_ceiling']) or 'none'}")


if __name__ == "__main__":
    main()
