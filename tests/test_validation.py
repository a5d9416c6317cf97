"""The model against every published measurement in decodescope/validate/data (figures printed by
benchmarks/validate.py): no measurement may beat its ceiling, and the expected value
keeps the median error the README states."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
import validate  # noqa: E402


@pytest.fixture(scope="module")
def rows():
    return validate.run_all()


def test_no_measurement_beats_its_ceiling(rows):
    assert [r.id for r in rows if r.above_ceiling] == []


# the rows the engine profiles were set on; rows added later (other source keys) are out of
# sample and their error is reported by benchmarks/validate.py, not pinned here
IN_SAMPLE = ("GF-", "TAO-", "XD-", "CLUB-", "SCN-")


def test_median_error_of_expected_within_target(rows):
    s = validate.summary([r for r in rows if r.id.startswith(IN_SAMPLE)])
    assert s["rows"] == 47 and s["rows_with_expected"] == 44
    assert s["median_abs_error"] <= 0.10


def test_reference_case_is_explained_out_of_sample(rows):
    # the SGLang profile is not fitted to these points
    assert all(abs(r.error) < 0.10 for r in rows if r.id.startswith("SCN"))
