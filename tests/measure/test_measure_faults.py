"""Every fault against a real local server that misbehaves on purpose
(tests/scripted_server.py, its own process): each bad request is recorded as failed with
its reason, the run goes on, and every finished request stays in the run file."""

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
from conftest import assert_summary_reproduced, free_port

from decodescope.errors import DecodescopeError
from decodescope.measure.runfile import read_run

pytestmark = pytest.mark.server


@dataclass
class TC:
    name: str
    model: str  # the scripted server's per-request behaviour
    error_kind: str
    says: str  # a piece of the recorded reason
    extra: tuple = ()


FAULTS = [
    TC("HTTP 5xx with a body", "fault=http,code=500", "http", 'HTTP 500: {"error": {"message": "scripted failure"'),
    TC("HTTP 4xx with a body", "fault=http,code=429", "http", "HTTP 429"),
    TC("stream dropped mid-response", "fault=drop", "dropped", "dropped mid-response"),
    TC("malformed SSE chunk", "fault=malformed", "malformed", "malformed SSE chunk"),
    TC("stall past --timeout", "fault=stall,interval_ms=1", "timeout", "no data for 0.5 s", ("--timeout", "0.5")),
    TC("error event mid-stream", "fault=error_event", "server_error", "scripted mid-stream error"),
    TC("stream without a token", "fault=no_tokens", "no_tokens", "no text chunk"),
]


@pytest.mark.parametrize("tc", FAULTS, ids=lambda tc: tc.name)
def test_fault_fails_its_request_and_the_run_goes_on(tc, scripted_server, measure):
    model = f"{tc.model},every=2,run={tc.error_kind}-{tc.name[:8]}"  # every 2nd request misbehaves
    args = "--suite code --requests 4 --warmup 0 --json".split()
    m = measure(scripted_server.url, "--model", model, *args, *tc.extra)
    assert m.exception is None and m.exit_code == 0, m.stderr
    (suite,) = m.json()["suites"]
    assert (suite["requests_ok"], suite["requests_failed"]) == (2, 2)
    assert suite["errors"] == {tc.error_kind: 2}
    run = read_run(m.run_file)
    failed = [r for r in run.requests if not r.ok]
    assert len(run.requests) == 4 and run.complete
    assert all(tc.says in r.error for r in failed), failed[0].error
    assert_summary_reproduced(m.run_file)


def test_a_server_that_closes_after_each_stream_loses_no_request(scripted_server, measure):
    """llama-server closes the connection after a streamed response while its headers say
    keep-alive; the next request on that pooled connection cannot be written and is sent
    again, once, on a new connection, its timing started over."""
    args = "--model tokens=4,close=1,run=close --suite code --requests 6 --warmup 0 --json".split()
    m = measure(scripted_server.url, *args)
    (suite,) = m.json()["suites"]
    assert (suite["requests_ok"], suite["requests_failed"]) == (6, 0), suite["errors"]
    assert suite["resent"] >= 1, "the next request went out on the stale connection and was sent again"
    resent = [r for r in read_run(m.run_file).requests if r.resent]
    assert len(resent) == suite["resent"] and all(r.ok for r in resent)


def test_a_server_that_hangs_up_before_answering_fails_the_request_after_one_retry(scripted_server, measure):
    args = "--model fault=hangup,run=hangup --suite code --requests 2 --warmup 0 --json".split()
    m = measure(scripted_server.url, *args)
    assert m.exit_code == 1, "nothing succeeded"
    run = read_run(m.run_file)
    assert [r.error_kind for r in run.requests] == ["dropped", "dropped"]
    assert all("dropped before the response" in r.error for r in run.requests), run.requests[0].error


@pytest.mark.parametrize("model", [(), ("--model", "m")], ids=["model from the server", "--model given"])
def test_nothing_listening_is_one_cannot_connect_line_before_the_run(measure, model):
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    m = measure(url, *model, "--suite", "code", "--requests", "2", "--json")
    assert isinstance(m.exception, DecodescopeError), m.output
    assert str(m.exception.what) == f"cannot connect to {url}: " + str(m.exception.what).split(": ", 1)[1]
    assert "\n" not in m.exception.what and "aiohttp" not in m.exception.what
    assert not m.run_file.exists(), "no request was sent, so no run file"


def test_the_cli_says_cannot_connect_in_one_line_and_exits_non_zero(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    cmd = [sys.executable, "-m", "decodescope", "measure", url, "--out", str(tmp_path / "r.jsonl")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    first, *rest = proc.stderr.splitlines()
    assert first.startswith(f"error: cannot connect to {url}: ") and "Traceback" not in proc.stderr
    assert rest and rest[0].lstrip().startswith("fix:")


@pytest.mark.parametrize(
    "args, says",
    [
        (("--suite", "no-such-suite"), "no prompt suite"),
        (("--extra-body", "{not json"), "--extra-body is not JSON"),
        (("--slo", "ttft=5"), "--slo"),
        (("--requests", "3", "--duration", "2"), "--duration"),
    ],
)
def test_bad_local_input_is_refused_before_connecting(measure, args, says):
    # nothing listens at the URL: the local error must come first
    m = measure(f"http://127.0.0.1:{free_port()}", "--model", "m", *args)
    assert isinstance(m.exception, DecodescopeError) and says in str(m.exception), m.exception


def test_ctrl_c_stops_cleanly_with_130_and_keeps_finished_requests(scripted_server, tmp_path):
    out = tmp_path / "run.jsonl"
    model = "tokens=10,interval_ms=40,run=sigint"  # 0.4 s per request
    cmd = [
        sys.executable,
        "-m",
        "decodescope",
        "measure",
        scripted_server.url,
        "--model",
        model,
        "--suite",
        "code",
        "--requests",
        "30",
        "--concurrency",
        "2",
        "--warmup",
        "0",
        "--out",
        str(out),
        "--json",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for_requests(out, 2, proc)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr.decode()
    printed = json.loads(stdout)
    assert printed["interrupted"] is True
    run = read_run(out)
    assert run.complete, "the summary line must be written on Ctrl-C"
    kinds = [r.error_kind for r in run.requests]
    assert kinds.count(None) >= 2 and kinds.count("cancelled") == 2, kinds  # 2 were in flight
    assert len(run.requests) < 30
    assert_summary_reproduced(out)


def _wait_for_requests(path, n: int, proc, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count('"type": "request"') >= n:
            return
        assert proc.poll() is None, proc.stderr.read().decode()
        time.sleep(0.05)
    raise AssertionError(f"no {n} finished requests in {path} after {timeout_s} s")


def test_api_key_comes_from_the_environment_and_is_never_saved(scripted_server, measure):
    model = "key=s3cret-value,run=key"  # the server answers 401 without this bearer key
    one = (scripted_server.url, "--model", model, "--suite", "code", "--requests", "1", "--json")
    m = measure(*one, env={"OPENAI_API_KEY": "s3cret-value"})
    assert m.json()["requests_ok"] == 1
    assert "s3cret-value" not in m.run_file.read_text().replace(model, "")
    m = measure(*one, "--api-key-env", "DS_KEY", env={"DS_KEY": "s3cret-value", "OPENAI_API_KEY": None})
    assert m.json()["requests_ok"] == 1, "--api-key-env names the variable to read"
    m = measure(*one, "--api-key-env", "DS_UNSET_KEY", env={"DS_UNSET_KEY": None})
    assert isinstance(m.exception, DecodescopeError) and "DS_UNSET_KEY" in str(m.exception)
    assert os.environ.get("DS_UNSET_KEY") is None
