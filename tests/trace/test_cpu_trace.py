"""Traces that torch.profiler writes here, around a tiny decode loop on the CPU."""

import pytest
from tracefiles import load, run

from decodescope.trace.reader import read_trace
from decodescope.trace.summary import analyse

torch = pytest.importorskip("torch")


def _decode_loop_trace(path, steps: int, schedule: bool):
    """A 2-layer toy LM, greedy decode of `steps` tokens, each in a record_function range."""
    torch.manual_seed(0)
    emb, l1, l2 = torch.nn.Embedding(100, 32), torch.nn.Linear(32, 32), torch.nn.Linear(32, 100)
    tok = torch.tensor([1])
    kw = {"schedule": torch.profiler.schedule(wait=0, warmup=1, active=steps, repeat=1),
          "on_trace_ready": lambda p: p.export_chrome_trace(str(path))} if schedule else {}
    with torch.no_grad(), torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], **kw) as prof:
        for _ in range(steps + 1 if schedule else steps):  # with a schedule: one warm-up step
            with torch.profiler.record_function("decode_step"):
                tok = l2(torch.relu(l1(emb(tok)))).argmax(-1)
            if schedule:
                prof.step()
    if not schedule:
        prof.export_chrome_trace(str(path))
    return path


@pytest.mark.parametrize("schedule", [False, True], ids=["record_function", "ProfilerStep"])
def test_cpu_trace_is_read_and_says_no_gpu(tmp_path, schedule):
    path = _decode_loop_trace(tmp_path / "cpu.pt.trace.json.gz", 4, schedule)
    doc = load(path)
    ranges = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    assert sum(1 for e in ranges if e["name"] == "decode_step") == 4
    t = read_trace(str(path))
    assert t.problems == [] and t.gpu == []
    assert sorted(a[0] for a in t.annotations) == sorted(e["name"] for e in ranges)
    report = analyse([str(path)])
    assert report.ranks[0].steps == ()
    assert any("no GPU events" in p for p in report.problems)
    r = run(path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no GPU events" in r.stdout and "error: no steps" in r.stderr
