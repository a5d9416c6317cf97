"""`decodescope validate`: the model against the published measurements in
decodescope/validate/data. No measurement may beat its ceiling; fitting never touches
the loaded profiles; the leave-one-source-out split and the fit's shortcut are checked
against hand-derived numbers and against the model itself."""

import csv
import dataclasses
import json
import shutil
import subprocess
import sys

import pytest

from decodescope.errors import DecodescopeError
from decodescope.model.engines import engines
from decodescope.validate.fit import (Linear, Sample, bounds, candidate_params, leave_one_source_out, linearise, neutral,
                                      value, with_values)
from decodescope.validate.rows import DATA, load_cases
from decodescope.validate.run import validate


@pytest.fixture(scope="module")
def result():
    return validate()


def test_no_measurement_beats_its_ceiling(result):
    assert [(r.id, r.measured, r.ceiling) for r in result.rows if r.above_ceiling] == []


def test_every_row_is_run_or_skipped_with_a_reason(result):
    cases, skipped = load_cases()
    assert len(result.rows) == len(cases) >= 343
    assert all(s.reason for s in skipped)


def test_profiles_without_rows_say_so(result):
    by = {e.engine: e for e in result.engines}
    assert by["transformers"].rows == () and "no published rows" in by["transformers"].note
    assert "one source" in by["llamacpp"].note or len(by["llamacpp"].sources) > 1


def test_profile_numbers_lie_within_their_physical_bounds():
    # efficiencies at most 0.90 (an H200 copy reached 4.30 of 4.8 TB/s); every kernel floor
    # between the H200's 1.1 us (CUDA graph) and 6.7 us (eager launch)
    for p in engines().values():
        names = ["bw_efficiency", "kernel_floor_us", "host_ms_per_pass", "host_ms_per_draft_step",
                 "allreduce_latency_scale", "flops_efficiency"] + [f"memory_efficiency.{k}" for k in p.memory_efficiency]
        names += [f"format_efficiency.{k}" for k in p.format_efficiency]
        for name in names:
            lo, hi = bounds(name)
            assert lo <= value(p, name) <= hi, (p.id, name)


def test_fitting_leaves_the_loaded_profiles_unchanged():
    before = {k: dataclasses.asdict(p) for k, p in engines().items()}
    ids = {k: id(p) for k, p in engines().items()}
    validate("gpt-fast", refit=True)
    assert {k: dataclasses.asdict(p) for k, p in engines().items()} == before
    assert {k: id(p) for k, p in engines().items()} == ids


def _sample(name, source, inv, ms):
    # tokens = 1 per round, so tok/s = 1000 / round_ms
    return Sample(name, source, 1.0, 1e3 / ms,
                  Linear(0.0, "bw_efficiency", inv, (), (("host_ms_per_pass", 1.0),)))


def test_compute_share_enters_the_shortcut_as_its_inverse():
    # round_ms = const + inv / bw + compute / flops: 1 + 2 / 0.5 + 3 / 0.6 = 1 + 4 + 5 = 10 ms
    lin = Linear(1.0, "bw_efficiency", 2.0, (), (), 3.0)
    assert lin.round_ms({"bw_efficiency": 0.5, "flops_efficiency": 0.6}) == pytest.approx(10.0)
    assert lin.params == {"bw_efficiency", "flops_efficiency"}
    # fitted for TensorRT-LLM only (its tables' rows are compute-bound), never for the others
    cases = load_cases()[0]
    assert "flops_efficiency" in candidate_params("trtllm", [c for c in cases if c.engine == "trtllm"])
    assert "flops_efficiency" not in candidate_params("vllm", [c for c in cases if c.engine == "vllm"])


def test_leave_one_source_out_on_hand_made_rows():
    # round_ms = inv / bw_efficiency + host_ms_per_pass. Source A's rows are exactly
    # bw 0.8, host 0.5: 8/0.8+0.5 = 10.5 ms and 16/0.8+0.5 = 20.5 ms. Source B's are
    # bw 0.5, host 1.0: 4/0.5+1 = 9 ms and 12/0.5+1 = 25 ms.
    rows = [_sample("a1", "A", 8, 10.5), _sample("a2", "A", 16, 20.5),
            _sample("b1", "B", 4, 9.0), _sample("b2", "B", 12, 25.0)]
    folds = leave_one_source_out(rows, {"bw_efficiency": 0.6, "host_ms_per_pass": 2.0})
    # the search stops when its simplex's losses agree to 1e-10; near the optimum the loss of a row
    # d off is about d^2 / (2 x 0.01) (fit._loss), so the values are exact to about 1e-5
    assert folds["B"] == pytest.approx({"bw_efficiency": 0.8, "host_ms_per_pass": 0.5}, rel=1e-4)  # fitted on A
    assert folds["A"] == pytest.approx({"bw_efficiency": 0.5, "host_ms_per_pass": 1.0}, rel=1e-4)  # fitted on B
    held = {s.id: s.tok_s(folds[s.source]) / s.measured - 1 for s in rows}
    # B predicted from A: b1 4/0.8+0.5 = 5.5 ms against 9 ms: 9/5.5-1 = +63.6 %; b2 15.5 against 25 ms: +61.3 %
    # A predicted from B: a1 8/0.5+1 = 17 ms against 10.5 ms: 10.5/17-1 = -38.2 %; a2 33 against 20.5 ms: -37.9 %
    assert held == pytest.approx({"b1": 9 / 5.5 - 1, "b2": 25 / 15.5 - 1, "a1": 10.5 / 17 - 1, "a2": 20.5 / 33 - 1},
                                 rel=1e-4)
    assert leave_one_source_out(rows[:2], {"bw_efficiency": 0.6, "host_ms_per_pass": 2.0}) == {}  # one source


# TRTPERF9-04 / TRTPERF-03: compute-bound static batches, where flops_efficiency is fitted too
@pytest.mark.parametrize("row", ["GF-03", "GF-08", "XD-15", "CLUB-01", "SCN-01", "TRTPERF9-04", "TRTPERF-03"])
def test_the_fit_shortcut_equals_the_model(row):
    """Linear's round time at a profile far from where it was taken equals the model's."""
    case = next(c for c in load_cases()[0] if c.id == row)
    params = candidate_params(case.engine, [case])
    start = neutral(engines()[case.engine], params)
    lin = linearise(case, start, params)
    v = {p: value(start, p) for p in params}
    moved = {p: x * 0.7 if p.endswith("efficiency") or "efficiency." in p else x + 1.3 for p, x in v.items()}
    assert lin.round_ms(moved) == pytest.approx(case.expected_round_ms(with_values(start, moved)), rel=1e-9)


def test_rows_the_model_cannot_run_are_skipped_with_the_reason(tmp_path, result):
    shutil.copytree(DATA, tmp_path, dirs_exist_ok=True)
    with open(tmp_path / "public.csv", "a") as f:
        f.write("NEW-01,,,,,,,,,,,,,,,,,,42,tok/s,NEW,,,\nNEW-02,,,,,,,,,,,,,,,,,,7,tok/s,NEW,,,\n")
    with open(tmp_path / "deployments.csv", "a") as f:
        f.write("NEW-01,no-such-model-9b,h100-sxm,1,1,,bf16,bf16,vllm,1,100,none,,,,per_user,,\n")
    v = validate("vllm", data=tmp_path)
    reasons = {s.id: s.reason for s in v.skipped}
    assert "no config found for 'no-such-model-9b'" in reasons["NEW-01"]
    assert reasons["NEW-02"] == "no deployment in deployments.csv"
    assert len(v.rows) == len([r for r in result.rows if r.engine == "vllm"])


def test_a_file_without_its_columns_is_one_clear_error(tmp_path):
    shutil.copytree(DATA, tmp_path, dirs_exist_ok=True)
    (tmp_path / "deployments.csv").write_text("id,model\nGF-01,llama-2-7b\n")
    with pytest.raises(DecodescopeError, match="lacks the column"):
        validate(data=tmp_path)


def test_a_row_id_given_twice_is_one_clear_error(tmp_path):
    # a merge that keeps both sides of a CSV conflict would count those rows twice
    shutil.copytree(DATA, tmp_path, dirs_exist_ok=True)
    with open(tmp_path / "deployments.csv") as f:
        first_row = f.read().splitlines()[1]
    with open(tmp_path / "deployments.csv", "a") as f:
        f.write(first_row + "\n")
    with pytest.raises(DecodescopeError, match="more than one row with the id"):
        validate(data=tmp_path)


def test_terminal_and_json_give_the_same_numbers():
    def run(*args):
        return subprocess.run([sys.executable, "-m", "decodescope", "validate", *args], capture_output=True,
                              text=True, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    j, t = run("--json"), run()
    assert j.returncode == 0 and t.returncode == 0, j.stderr + t.stderr
    data = json.loads(j.stdout)
    for e in data["engines"]:
        for kind in ("out_of_sample", "in_sample"):
            if e[kind]:
                assert f"{e[kind]['median_abs']:.1%}" in t.stdout
    assert "rows whose measurement beats the ceiling: none" in t.stdout and data["above_ceiling"] == []


def test_a_row_timed_through_a_frontend_checks_the_ceiling_only(tmp_path):
    """A figure timed through another program's loop (deployments.csv frontend) has no expected
    value and leaves the fit: the same row without the column is compared and fitted."""
    shutil.copytree(DATA, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "deployments.csv"
    lines = path.read_text(encoding="utf-8").splitlines()
    columns = lines[0].split(",")
    ooba = next(i for i, line in enumerate(lines) if line.startswith("OOBA-02,"))
    # the same row with the frontend column emptied (the row's other cells are kept as they are)
    # the row stops at its frontend cell (the columns after it, such as fp8_quant_after, left empty)
    cells = next(csv.reader([lines[ooba]]))
    assert lines[ooba].endswith(",text-generation-webui") and len(cells) == columns.index("frontend") + 1
    lines[ooba] = lines[ooba][: -len("text-generation-webui")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    as_shipped = {r.id: r for r in validate("exllamav2").rows}
    emptied = {r.id: r for r in validate("exllamav2", data=tmp_path).rows}
    assert as_shipped["OOBA-02"].expected is None and "timed through text-generation-webui" in as_shipped["OOBA-02"].note
    assert as_shipped["OOBA-02"].ceiling == pytest.approx(emptied["OOBA-02"].ceiling)
    assert emptied["OOBA-02"].expected is not None and "timed through" not in emptied["OOBA-02"].note
    # every other row keeps its figures: the loaded profile is the same, only the fit's rows differ
    assert {i: r.expected for i, r in as_shipped.items() if i != "OOBA-02"} == \
        {i: r.expected for i, r in emptied.items() if i != "OOBA-02"}
