"""`--fit` searches a linear model of each row (validate/fit.py Linear) taken at its start. A
batched-MoE cost enters it as a slope in ms, but the model prices it as a multiple of the
mat-vec kernel's time, which a fitted format efficiency changes: fitted far from the start,
the two disagree. relinearised_fit linearises the rows again where the fit landed and refits;
on llama.cpp's Metal rows (fitted Metal efficiencies near 0.6, their batched costs with them)
that must fit the rows better as the model itself computes them, not only its linear stand-in."""

import math
import statistics

from decodescope.model.engines import get_engine
from decodescope.validate.fit import Sample, candidate_params, fit, neutral, value, with_values
from decodescope.validate.rows import load_cases
from decodescope.validate.run import relinearised_fit


def test_refitting_where_the_fit_landed_fits_the_model_better():
    cases = [c for c in load_cases()[0] if c.engine == "llamacpp" and c.source in ("M2UB", "XD") and c.comparable]
    params = candidate_params("llamacpp", cases)
    start = neutral(get_engine("llamacpp"), params)
    samples = [Sample.of(c, start, params) for c in cases]
    params = [p for p in params if any(p in s.linear.params for s in samples)]
    once = fit(samples, {p: value(start, p) for p in params})

    def mean_log_error(values: dict[str, float]) -> float:
        profile = with_values(start, values)
        return statistics.fmean(abs(math.log(c.tok_s(profile)[1] / c.measured)) for c in cases)

    assert mean_log_error(relinearised_fit(cases, start, params, once)) < mean_log_error(once)
