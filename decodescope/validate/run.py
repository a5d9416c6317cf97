"""The model against every published measurement, per engine: the error of `expected`
in sample (the loaded engine profiles) and leave-one-source-out (each source's rows
predicted by a profile fitted from a neutral start on the other sources' rows only),
parameters at their bounds, rows whose measurement beats the ceiling, rows skipped."""

import statistics
from dataclasses import dataclass
from pathlib import Path

from decodescope.errors import DecodescopeError
from decodescope.model.engines import EngineProfile, engines
from decodescope.validate.fit import (Sample, at_bounds, candidate_params, fit, leave_one_source_out, neutral,
                                      value, with_values)
from decodescope.validate.rows import DATA, Case, Skipped, load_cases


UNITS = {"measured": "tok/s", "expected": "tok/s", "ceiling": "tok/s", "error": "expected / measured - 1",
         "median_abs": "|error|", "mean_abs": "|error|", "within_10": "share of rows with |error| <= 0.10",
         "within_25": "share of rows with |error| <= 0.25"}


@dataclass(frozen=True)
class RowResult:
    id: str
    source: str
    engine: str
    gpu: str
    model: str
    measured: float  # tok/s as published
    expected: float | None  # tok/s; None where the source gives no accept length
    ceiling: float  # tok/s
    note: str

    @property
    def error(self) -> float | None:
        return None if self.expected is None else self.expected / self.measured - 1

    @property
    def above_ceiling(self) -> bool:
        return self.measured > self.ceiling

    def to_dict(self) -> dict:
        return {**self.__dict__, "error": self.error, "above_ceiling": self.above_ceiling}


@dataclass(frozen=True)
class ErrorStats:
    """|expected / measured - 1| over some rows."""
    rows: int
    median_abs: float
    mean_abs: float
    within_10: float  # share of the rows, 0..1
    within_25: float

    @classmethod
    def of(cls, errors: list[float]) -> "ErrorStats | None":
        a = [abs(e) for e in errors]
        if not a:
            return None
        return cls(len(a), statistics.median(a), statistics.fmean(a), sum(e <= 0.10 for e in a) / len(a),
                   sum(e <= 0.25 for e in a) / len(a))

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class HeldOut:
    """A row predicted by the profile fitted without its source."""
    id: str
    source: str
    measured: float  # tok/s
    expected: float  # tok/s

    @property
    def error(self) -> float:
        return self.expected / self.measured - 1

    def to_dict(self) -> dict:
        return {**self.__dict__, "error": self.error}


@dataclass(frozen=True)
class EngineResult:
    engine: str
    profile_source: str  # engines.toml's own account of its numbers
    rows: tuple[RowResult, ...]
    sources: tuple[str, ...]
    in_sample: ErrorStats | None  # the loaded profile on every row with an expected value
    held_out: tuple[HeldOut, ...]
    out_of_sample: ErrorStats | None  # leave-one-source-out, from a neutral start
    params: tuple[str, ...]  # the parameters these rows inform (the fitted ones)
    at_bounds: tuple[str, ...]  # of the loaded profile
    fitted: tuple[tuple[str, float], ...] = ()  # --fit: values fitted on every row from the neutral start
    fitted_in_sample: ErrorStats | None = None
    fitted_at_bounds: tuple[str, ...] = ()

    @property
    def fitted_profile(self) -> bool:
        """The loaded profile was fitted to these rows (else its `in_sample` error is of an estimate)."""
        return self.profile_source.startswith("fit")

    @property
    def note(self) -> str:
        if not self.rows:
            return "no published rows: the profile's numbers are estimates"
        if not self.in_sample:
            return "no row with an expected value (accept length not published)"
        if len(self.sources) < 2:
            return "rows from one source only: no leave-one-source-out figure"
        return ""

    def to_dict(self) -> dict:
        stats = {k: getattr(self, k).to_dict() if getattr(self, k) else None
                 for k in ("in_sample", "out_of_sample", "fitted_in_sample")}
        return {"engine": self.engine, "profile_source": self.profile_source, "sources": list(self.sources),
                "rows": [r.to_dict() for r in self.rows], "held_out": [h.to_dict() for h in self.held_out],
                **stats, "params": list(self.params), "at_bounds": list(self.at_bounds),
                "fitted": dict(self.fitted), "fitted_at_bounds": list(self.fitted_at_bounds), "fitted_profile": self.fitted_profile,
                "note": self.note}


@dataclass(frozen=True)
class Validation:
    engines: tuple[EngineResult, ...]
    skipped: tuple[Skipped, ...]

    @property
    def rows(self) -> tuple[RowResult, ...]:
        return tuple(r for e in self.engines for r in e.rows)

    @property
    def in_sample(self) -> ErrorStats | None:
        return ErrorStats.of([r.error for r in self.rows if r.error is not None])

    @property
    def out_of_sample(self) -> ErrorStats | None:
        return ErrorStats.of([h.error for e in self.engines for h in e.held_out])

    @property
    def above_ceiling(self) -> tuple[str, ...]:
        return tuple(r.id for r in self.rows if r.above_ceiling)

    def to_dict(self) -> dict:
        return {"units": UNITS, "rows": len(self.rows), "in_sample": self.in_sample.to_dict() if self.in_sample else None,
                "out_of_sample": self.out_of_sample.to_dict() if self.out_of_sample else None,
                "above_ceiling": list(self.above_ceiling), "skipped": [s.to_dict() for s in self.skipped],
                "engines": [e.to_dict() for e in self.engines]}


def _row(c: Case) -> RowResult:
    ceiling, expected = c.tok_s()
    d = c.deployment
    return RowResult(c.id, c.source, c.engine, d.gpu.id, c.arch.name, c.measured,
                     expected if c.comparable else None, ceiling, c.note)


def engine_result(profile: EngineProfile, cases: list[Case], refit: bool = False) -> EngineResult:
    rows = tuple(_row(c) for c in cases)
    known = [c for c in cases if c.comparable]
    params = candidate_params(profile.id, cases)
    start = neutral(profile, params)
    samples = [Sample.of(c, start, params) for c in known]
    params = [p for p in params if any(p in s.linear.params for s in samples)]
    v0 = {p: value(start, p) for p in params}
    by_id = {c.id: c for c in known}
    held = tuple(HeldOut(s.id, s.source, s.measured, by_id[s.id].tok_s(with_values(start, values))[1])
                 for src, values in leave_one_source_out(samples, v0).items() for s in samples if s.source == src)
    out = EngineResult(profile.id, profile.source, rows, tuple(sorted({c.source for c in cases})),
                       ErrorStats.of([r.error for r in rows if r.error is not None]), held,
                       ErrorStats.of([h.error for h in held]), tuple(params), tuple(at_bounds(profile, params)))
    if not refit or not samples:
        return out
    values = relinearised_fit(known, start, params, fit(samples, v0))
    fitted = with_values(start, values)
    errors = [c.tok_s(fitted)[1] / c.measured - 1 for c in known]
    return EngineResult(**{**out.__dict__, "fitted": tuple(values.items()), "fitted_in_sample": ErrorStats.of(errors),
                           "fitted_at_bounds": tuple(at_bounds(fitted, params))})


def relinearised_fit(known: list[Case], start: EngineProfile, params: list[str], values: dict[str, float],
                     passes: int = 2) -> dict[str, float]:
    """`values` refitted on rows linearised at `values` themselves, `passes` times: Linear is a
    secant taken at the start, and a cost it prices as a slope (moe_batched_slowdown, in ms of the
    mat-vec kernel's time) is really that time's multiple, so it moves with a fitted efficiency;
    refitting where the fit landed makes the two agree."""
    for _ in range(passes):
        at = with_values(start, values)
        values = fit([Sample.of(c, at, params) for c in known], values)
    return values


def validate(engine: str | None = None, refit: bool = False, data: Path = DATA) -> Validation:
    """Every engine profile (or only `engine`) against the rows in `data`."""
    profiles = engines()
    if engine is not None and engine not in profiles:
        raise DecodescopeError(f"unknown engine '{engine}'", f"use one of: {' '.join(profiles)}")
    cases, skipped = load_cases(data)
    names = [engine] if engine else list(profiles)
    return Validation(tuple(engine_result(profiles[n], [c for c in cases if c.engine == n], refit) for n in names),
                      skipped)
