"""explain --trace: a profiler trace's median decode step replaces the modelled gap terms.

The traces are real: a plain PyTorch decode loop of Llama-3.1-8B's shape at batch 1 on an
H200 (tests/data/h200/gpu_check_results.json, section "trace"), once replayed as a CUDA
graph and once eagerly. The per-class figures below are the medians of their 5 decode
steps as `decodescope trace FILE --json` prints them (tests/trace/ checks those within
1 % of a plain json.load sum of the kernels)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from decodescope.cli.main import cli

H200 = Path(__file__).parent.parent / "data" / "h200"
GRAPH, EAGER = str(H200 / "trace_graph_llama8b_shape.json.gz"), str(H200 / "trace_eager_llama8b_shape.json.gz")
# graph trace, ms per step: wall 7.12982, GEMM 3.965284, attention 0.921856, idle 0.637448;
# other kernels: norm 0.459134 + sampling 0.036352 + memcpy 0.266629 + memset 0.029503 + elementwise 0.813657
GRAPH_STEP, GRAPH_MEMORY, GRAPH_IDLE = 7.129820, 3.965284 + 0.921856, 0.637448
GRAPH_OTHER = 0.459134 + 0.036352 + 0.266629 + 0.029503 + 0.813657  # 1.605275 ms
# eager trace: wall 25.337225, GEMM 3.974550, attention 0.589282, idle 19.314808
EAGER_STEP, EAGER_MEMORY, EAGER_IDLE = 25.337225, 3.974550 + 0.589282, 19.314808
# ceiling at 4.8e12 B/s (H200 datasheet): weights 15,009,849,344 B (the real tensors, gpu_check_results.json)
# = 3.127052 ms, KV cache of 1024 cached tokens + the new one: 1025 x 32 layers x 8 heads x 128 x 2 (K, V)
# x 2 B = 134,348,800 B = 0.027989 ms
CEILING = 1e3 * (15_009_849_344 + 134_348_800) / 4.8e12  # 3.155041 ms; no allreduce on one GPU


def explain(*args):
    r = CliRunner().invoke(cli, ["explain", "llama-3.1-8b", "--gpu", "h200", "--batch", "1", "--context", "1024",
                                 *args])
    assert r.exit_code == 0, (r.output, r.exception)
    return r.stdout


def points(step_ms):
    return f"1:{1000 / step_ms:.6f}"  # one token per step at the trace's own step time


@pytest.mark.parametrize("trace, engine, step, memory, idle", [
    (GRAPH, "gpt-fast", GRAPH_STEP, GRAPH_MEMORY, GRAPH_IDLE),
    (EAGER, "transformers", EAGER_STEP, EAGER_MEMORY, EAGER_IDLE)])
def test_trace_terms_replace_the_modelled_ones_and_still_sum_exactly(trace, engine, step, memory, idle):
    j = json.loads(explain("--engine", engine, "--points", points(step), "--trace", trace, "--json"))
    assert j["ceiling_round_ms"] == pytest.approx(CEILING, rel=1e-6)
    gap = {t["term"]: t for t in j["gap"]}
    # the identity: every term together is measured - ceiling, to the last bit
    assert sum(t["ms"] for t in j["gap"]) == pytest.approx(j["measured_round_ms"] - j["ceiling_round_ms"], abs=1e-9)
    assert j["measured_round_ms"] == pytest.approx(step, rel=1e-6)
    assert set(gap) == {"bandwidth", "allreduce", "idle", "unexplained"}  # host + kernel floors -> idle
    assert {gap[k]["source"] for k in ("bandwidth", "allreduce", "idle")} == {"trace"}
    # graph: 4.887140 - 3.155041 = 1.732099 ms; eager: 4.563832 - 3.155041 = 1.408791 ms
    assert gap["bandwidth"]["ms"] == pytest.approx(memory - CEILING, abs=1e-5)
    assert gap["idle"]["ms"] == pytest.approx(idle, abs=1e-5)
    assert gap["allreduce"]["ms"] == 0.0
    assert j["observations"]["trace"]["steps"] == 5 and not j["trace_disagrees"]


def test_unexplained_is_the_graph_traces_other_kernels():
    j = json.loads(explain("--engine", "gpt-fast", "--points", points(GRAPH_STEP), "--trace", GRAPH, "--json"))
    u = j["gap"][-1]
    # 7.129820 - 3.155041 - 1.732099 - 0.637448 = 1.605232 ms; the other kernels were busy 1.605275 ms
    # (the medians of wall, busy and idle come from different steps, so they differ in the 5th digit)
    assert u["term"] == "unexplained" and u["ms"] == pytest.approx(GRAPH_OTHER, abs=1e-3)
    assert "1.61 ms" in u["note"]


def test_every_form_says_which_trace_and_how_many_steps(tmp_path):
    html = tmp_path / "r.html"
    args = ("--engine", "gpt-fast", "--points", points(GRAPH_STEP), "--trace", GRAPH)
    forms = [explain(*args, "--markdown"), explain(*args, "--html", str(html))]
    forms.append(html.read_text())
    for out in forms:
        assert "trace_graph_llama8b_shape.json.gz: 5 decode steps, median step 7.13 ms" in out
        assert "+1.73 ms" in out and "+0.64 ms" in out  # bandwidth, idle
        assert "Warning" not in out


def test_a_trace_of_another_run_is_flagged():
    # measured 10 ms per round against the trace's 7.13 ms: 7.12982 / 10 - 1 = -28.7 %
    out = explain("--engine", "gpt-fast", "--points", "1:100", "--trace", GRAPH, "--markdown")
    assert "-28.7 % against the measured round" in out and "trace is of another run or another load" in out
    # 7.5 ms: -4.9 %, within 10 %
    assert "Warning" not in explain("--engine", "gpt-fast", "--points", "1:133.333333", "--trace", GRAPH, "--markdown")


@pytest.mark.parametrize("content, message", [(None, "cannot read trace"), ("not a trace\n", "no decode steps")])
def test_a_bad_trace_is_one_clear_error(content, message, tmp_path):
    f = tmp_path / "t.json"
    if content is not None:
        f.write_text(content)
    r = subprocess.run([sys.executable, "-m", "decodescope", "explain", "llama-3.1-8b", "--gpu", "h200",
                        "--points", "1:100", "--trace", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


def test_a_profiler_folder_reads_as_its_trace_files(tmp_path):
    # the folder VLLM_TORCH_PROFILER_DIR names: the rank's trace, and the front end's CPU-only
    # trace (its name holds "async_llm"), which is no rank and must not be read
    (tmp_path / "rank0.pt.trace.json.gz").write_bytes(Path(GRAPH).read_bytes())
    (tmp_path / "async_llm.pt.trace.json").write_text('{"traceEvents": []}')
    args = ("--engine", "gpt-fast", "--points", "1:100", "--json")
    folder, file = json.loads(explain(*args, "--trace", str(tmp_path))), json.loads(explain(*args, "--trace", GRAPH))
    # the same figures; only the file's name in the inputs differs
    assert json.dumps(folder).replace("rank0.pt.trace", "trace_graph_llama8b_shape") == json.dumps(file)
    assert '"steps": 5' in json.dumps(file["observations"])


def test_a_file_that_is_no_trace_says_why(tmp_path):
    (tmp_path / "notes.json").write_text('{"model": "llama"}')
    r = subprocess.run([sys.executable, "-m", "decodescope", "explain", "llama-3.1-8b", "--gpu", "h200",
                        "--points", "1:100", "--trace", str(tmp_path / "notes.json")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a torch-profiler Chrome trace" in r.stderr, r.stderr
