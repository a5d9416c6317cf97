"""explain --calibration: the gap terms whose numbers a calibration file measured say
`calibration`, in every form of the report; expectations worked out by hand."""

import json

import pytest
from click.testing import CliRunner

from decodescope.cli.main import cli
from decodescope.hardware.calibration import AllreducePoint, Calibration, Gemv, save

# Llama-3.1-8B at batch 1, one H200: 15,009,849,344 weight bytes per step (the real tensors,
# tests/data/h200/gpu_check_results.json) + KV cache of 1024 cached tokens and the new one:
# 1025 x 32 layers x 8 heads x 128 x 2 (K, V) x 2 bytes = 134,348,800 B: 15,144,198,144 bytes per round.
ROUND_BYTES = 15_009_849_344 + 134_348_800
DATASHEET_BW = 4.8e12  # H200 HBM3e, bytes/s (gpus.toml)
MEASURED_BW = 4.0e12  # what the calibration below says the GEMVs streamed
FLOOR_US = 2.0  # measured in-graph launch
ALPHA_US = 20.0  # measured smallest allreduce
POINTS = "1:125"  # 8 ms per round


def calibration(path, gpus=1):
    # one GEMV shape at batch 1 reading 4.0e12 weight bytes/s: weight_bw(1) = 4.0e12, under the datasheet
    cal = Calibration(device="h200", device_name="NVIDIA H200", memory_bytes=141e9, versions={"torch": "test"},
                      copy_bw_bytes_s=4.3e12, copy_bw_best_bytes_s=4.3e12, matmul_flops={"bf16": 700e12},
                      launch_eager_us=6.0, launch_graph_us=FLOOR_US,
                      gemv=(Gemv(k=4096, n=14336, batch=1, dtype="bf16", us=30.0, weight_bytes_s=MEASURED_BW),),
                      allreduce=(AllreducePoint(bytes=8192, us=ALPHA_US), AllreducePoint(bytes=1 << 20, us=40.0))
                      if gpus > 1 else (), gpus=gpus, created="2026-11-30T22:00:00Z")
    save(cal, path)
    return str(path)


def explain(*args):
    r = CliRunner().invoke(cli, ["explain", "llama-3.1-8b", "--gpu", "h200", "--engine", "sglang",
                                 "--points", POINTS, *args])
    assert r.exit_code == 0, (r.output, r.exception)
    return r.stdout


def terms(out):
    return {t["term"]: t for t in json.loads(out)["gap"]}


def test_calibrated_terms_say_calibration_and_carry_the_measured_numbers(tmp_path):
    cal = calibration(tmp_path / "h200.json")
    plain, measured = terms(explain("--json")), terms(explain("--json", "--calibration", cal))
    assert {t["source"] for t in plain.values()} == {"model", "measured"}
    assert measured["bandwidth"]["source"] == "calibration" and measured["kernel_floors"]["source"] == "calibration"
    # the host time is not measured by calibrate; one GPU has no calibrated allreduce
    assert measured["host"]["source"] == "model" and measured["allreduce"]["source"] == "model"
    assert measured["host"]["ms"] == plain["host"]["ms"]
    # bandwidth: 15,144,198,144 B x (1/4.0e12 - 1/4.8e12) s = 15,144,198,144 / 24e12 s = 0.631008 ms
    assert measured["bandwidth"]["ms"] == pytest.approx(1e3 * ROUND_BYTES * (1 / MEASURED_BW - 1 / DATASHEET_BW),
                                                        rel=1e-9)
    assert "4000.0 GB/s" in measured["bandwidth"]["note"] and "h200.json" in measured["bandwidth"]["note"]
    # kernel floors: the same kernels at the measured 2.0 us launch plus what the sglang
    # profile's fitted floor holds beyond the 1.1 us in-graph launch it was fitted against
    from decodescope.model.engines import GRAPH_KERNEL_US, get_engine
    floor = get_engine("sglang").kernel_floor_us
    assert measured["kernel_floors"]["ms"] == pytest.approx(
        plain["kernel_floors"]["ms"] * (FLOOR_US + floor - GRAPH_KERNEL_US) / floor, rel=1e-9)
    # the terms still sum to measured - ceiling: 8 ms - ceiling
    j = json.loads(explain("--json", "--calibration", cal))
    assert sum(t["ms"] for t in j["gap"]) == pytest.approx(8.0 - j["ceiling_round_ms"], abs=1e-9)


def test_allreduce_latency_from_the_calibration_on_two_gpus(tmp_path):
    cal = calibration(tmp_path / "h200x2.json", gpus=2)
    t = terms(explain("--json", "--tp", "2", "--link", "nvlink", "--calibration", cal))
    assert t["allreduce"]["source"] == "calibration" and "20.0 us" in t["allreduce"]["note"]


def test_every_form_names_the_calibration(tmp_path):
    cal = calibration(tmp_path / "h200.json")
    html = tmp_path / "r.html"
    j = terms(explain("--json", "--calibration", cal))
    bw = f"{j['bandwidth']['ms']:+.2f} ms"
    md = explain("--markdown", "--calibration", cal)
    term = explain("--calibration", cal, "--html", str(html))
    assert "| bandwidth not reached | " + bw + " | calibration |" in md
    assert "| kernel floors | " in md and md.count("| calibration |") == 2
    assert "calibration" in term and bw in term
    page = html.read_text()
    assert page.count("<td>calibration</td>") == 2 and bw in page
