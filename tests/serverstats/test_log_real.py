"""`log` on real server-log excerpts from public issues (tests/data/logs, each file's
URL in its SOURCES). Expected values are worked out by hand from the lines."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_logscan import same

from decodescope.serverstats.logscan import scan_file, scan_log
from decodescope.serverstats.serverlog import parse_log

LOGS = Path(__file__).parent.parent / "data" / "logs"
WIDE = {**os.environ, "COLUMNS": "200"}  # rich wraps at 80 columns in a pipe


def lines(*names: str) -> list[str]:
    return [x for n in names for x in (LOGS / n).read_text().splitlines(keepends=True)]


def summary(*names: str, year: int = 2025):
    whole = parse_log(lines(*names), year=year).summary
    assert same(scan_log(lines(*names), year=year).summary(), whole)  # the fast path agrees
    return whole


def test_every_excerpt_is_listed_with_its_url():
    listed = {
        row.split()[0]: row.split()[1]
        for row in (LOGS / "SOURCES").read_text().splitlines()
        if row.strip() and not row.startswith("#")
    }
    files = {p.name for p in LOGS.glob("*.log")}
    assert files == set(listed) and len(files) >= 20
    assert all(url.startswith("https://github.com/") for url in listed.values())


def test_a_server_restarted_without_speculation_is_two_runs_never_averaged():
    # sglang#11948 (EAGLE3, 2025-10-22) followed by sglang#3909 (no speculation,
    # 2025-02-27): the clock goes back eight months at line 7
    s = summary("sglang_eagle3.log", "sglang_plain_tp0.log")
    eagle, plain = s.segments
    assert (eagle.first_line, eagle.last_line, eagle.reason.value) == (1, 6, "log start")
    assert (plain.first_line, plain.last_line, plain.reason.value) == (7, 15, "time went back")
    # EAGLE3: accept from all five windows, (2.17 + 1.95 + 1.80 + 2.05 + 1.80) / 5 = 1.954;
    # the 0.39 tok/s window after the idle prefill is warm-up, the other four are steady:
    # (178.86 + 165.41 + 188.68 + 165.59) / 4 = 174.635 tok/s at one request;
    # round = (1.95 + 1.80 + 2.05 + 1.80) / 4 = 1.90 tokens / 174.635 tok/s = 10.88 ms
    assert eagle.accept_len.mean == pytest.approx(1.954)
    assert eagle.gen_tok_s.mean == pytest.approx(174.635)
    assert eagle.round_ms == pytest.approx(1000 * 1.90 / 174.635)
    assert eagle.warmup_windows == 1
    # no speculation: nine windows at 8 requests, sum 1669.53 tok/s -> 185.503 tok/s,
    # 23.188 per request; no accept length and no start-up line: no round time
    assert plain.accept_len is None and plain.round_ms is None
    assert plain.gen_tok_s.mean == pytest.approx(1669.53 / 9)
    assert plain.gen_tok_s_per_req.mean == pytest.approx(1669.53 / 9 / 8)
    # the summary's top-level figures are the last run's
    assert (s.gen_tok_s, s.accept_len, s.round_ms) == (plain.gen_tok_s, None, None)


def test_two_vllm_processes_are_two_runs():
    # vllm#43295 (MTP, pid=5020) then club-3090#93 (DFlash, pid=1)
    s = summary("vllm_mtp_pid5020.log", "vllm_dflash_pid1.log")
    mtp, dflash = s.segments
    assert (mtp.first_line, mtp.last_line, mtp.reason.value) == (1, 4, "log start")
    assert (dflash.first_line, dflash.reason.value) == (6, "process change")
    # MTP: accept (2.53 + 2.77) / 2 = 2.65 from both spec lines; rates (1004.4 + 1024.8) / 2
    # = 1014.6 tok/s, per request (1004.4 / 8 + 1024.8 / 9) / 2 = 119.708; the round pairs
    # the spec line logged with a steady window (2.77; 2.53 came before any window)
    assert mtp.accept_len.mean == pytest.approx(2.65)
    assert mtp.gen_tok_s.mean == pytest.approx(1014.6)
    per_req = (1004.4 / 8 + 1024.8 / 9) / 2
    assert mtp.gen_tok_s_per_req.mean == pytest.approx(per_req)
    assert mtp.round_ms == pytest.approx(1000 * 2.77 / per_req)
    # DFlash at one request: accept (2.63 + 2.66) / 2 = 2.645, (123.8 + 124.5) / 2 = 124.15 tok/s,
    # round 2.645 / 124.15 = 21.31 ms
    assert dflash.accept_len.mean == pytest.approx(2.645)
    assert dflash.gen_tok_s.mean == pytest.approx(124.15)
    assert dflash.round_ms == pytest.approx(1000 * 2.645 / 124.15)


def test_dp_attention_ranks_add_up_to_the_server_total():
    # sglang#6081: five DP ranks between 18:31:21 and :25, 8 requests each
    s = summary("sglang_dp_attention_mtp.log")
    assert s.dp_ranks == 5 and len(s.segments) == 1
    # total = 171.01 + 168.28 + 173.06 + 155.80 + 152.08 = 820.23 tok/s; per rank 164.046
    assert s.gen_tok_s_total.mean == pytest.approx(820.23)
    assert s.gen_tok_s.mean == pytest.approx(820.23 / 5)
    # accept (2.90 + 2.86 + 2.94 + 2.65 + 2.58) / 5 = 2.786; round per request at 8 each:
    # 2.786 / (164.046 / 8) = 135.9 ms
    assert s.accept_len.mean == pytest.approx(2.786)
    assert s.round_ms == pytest.approx(1000 * 2.786 / (164.046 / 8))


def test_eight_dp_ranks_in_one_second():
    # sglang#20766: DP8..DP15 at 17:35:07: 6 x 3.83 + 3.82 + 3.84 = 30.64 tok/s in total
    s = summary("sglang_dp_ranks_plain.log")
    assert (s.dp_ranks, s.gen_tok_s_total.mean) == (8, pytest.approx(30.64))
    assert s.accept_len is None and s.round_ms is None  # acceptance unknown, not 1


def test_llamacpp_acceptance_from_its_draft_counts():
    # llama.cpp#23269: 192 tokens, 118 draft tokens accepted -> 192 - 118 = 74 verify
    # rounds, 192 / 74 = 2.595 tokens per round; at 13.40 tok/s a round takes 193.6 ms
    # (the log's own 14323.78 ms / 74 = 193.6 ms)
    s = summary("llamacpp_pid_prefix_mtp.log")
    assert s.accept_len.mean == pytest.approx(192 / 74) and s.accept_len.n == 1
    assert s.gen_tok_s_per_req.mean == 13.40 and s.gen_tok_s is None
    assert s.round_ms == pytest.approx(1000 * (192 / 74) / 13.40)
    assert s.round_ms == pytest.approx(14323.78 / 74, rel=0.001)
    rec = [r for r in parse_log(lines("llamacpp_pid_prefix_mtp.log")).records if r.kind == "decode"][0]
    assert rec.process == "53409"


def test_llamacpp_statistics_line_does_not_count_a_request_twice():
    # llama.cpp#24536: the draft line and the draft-eagle3 statistics line both say 2.92
    s = summary("llamacpp_eagle3_mean_len.log")
    assert (s.accept_len.mean, s.accept_len.n) == (2.92, 1)
    # a statistics line alone (#mean acc len absent: llama.cpp#19493): no accept length
    assert summary("llamacpp_spec_checkpoint.log").accept_len is None


def test_a_start_up_line_that_says_no_speculation_allows_the_round_time():
    # vllm#24162's start-up lines (speculative_config=None) before vllm#7540's V0 lines:
    # per request 88.1/1, 85.3/2, 117.6/2, 114.5/2, 116.4/2 -> mean 305.0 / 5 = 61.0 tok/s,
    # round = 1 token / 61.0 tok/s = 16.39 ms
    s = summary("vllm_engine_init_no_spec.log", "vllm_v0_no_spec.log")
    assert [g.reason.value for g in s.segments] == ["server start-up"]
    assert s.gen_tok_s_per_req.mean == pytest.approx(61.0)
    assert s.round_ms == pytest.approx(1000 / 61.0)
    assert summary("vllm_v0_no_spec.log").round_ms is None  # without it: unknown


def test_a_start_up_line_after_a_run_starts_a_new_segment():
    # club-3090#74's MTP run, then the start-up lines of club-3090#77, then #93's run
    s = summary("vllm_mtp_dual_nvlink.log", "vllm_startup_banner.log", "vllm_dflash_pid1.log")
    assert [g.reason.value for g in s.segments] == ["log start", "server start-up"]
    assert s.segments[1].first_line == 6  # the "Starting vLLM server" line


def test_an_idle_ending_vllm_window_keeps_its_acceptance_and_a_lower_bound():
    # club-3090#93's first window and spec line, with the request finished in the window
    # (Running: 0; built from the real line): 123.8 tok/s is a lower bound, 2.63 stands
    window, spec = lines("vllm_dflash_pid1.log")[1:3]
    s = parse_log([window.replace("Running: 1 reqs", "Running: 0 reqs"), spec], year=2025).summary
    assert s.accept_len.mean == 2.63
    assert (s.gen_tok_s.mean, s.lower_bound, s.gen_tok_s_per_req) == (123.8, True, None)


def test_a_log_without_decode_lines_says_so():
    p = subprocess.run([sys.executable, "-m", "decodescope", "log", str(LOGS / "sglang_prefill_only.log")],
                       capture_output=True, timeout=60, env=WIDE)
    assert p.returncode == 0, p.stderr
    assert b"without a decode line" in p.stdout and b"3 prefill" in p.stdout


def test_segments_in_json_and_table_agree(tmp_path):
    f = tmp_path / "two.log"
    f.write_text("".join(lines("sglang_eagle3.log", "sglang_plain_tp0.log")))
    out = json.loads(subprocess.run([sys.executable, "-m", "decodescope", "log", str(f), "--json"],
                                    capture_output=True, timeout=60).stdout)
    segs = out["summary"]["segments"]
    assert [(g["first_line"], g["last_line"], g["reason"]) for g in segs] == [(1, 6, "log start"), (7, 15, "time went back")]
    assert set(segs[0]) >= {"first_line", "last_line", "reason", "accept_len", "gen_tok_s", "gen_tok_s_total",
                            "gen_tok_s_per_req", "round_ms", "dp_ranks", "lower_bound"}
    assert out["summary"]["gen_tok_s"] == segs[-1]["gen_tok_s"]
    table = subprocess.run([sys.executable, "-m", "decodescope", "log", str(f)], capture_output=True, timeout=60, env=WIDE)
    text = table.stdout.decode()
    for figure in ("185.50", "10.9", "time went back", "7-15"):
        assert figure in text, text


@pytest.mark.parametrize("workers", [2, 3, 5])
def test_parallel_scan_of_real_multi_run_logs_equals_one_pass(tmp_path, workers):
    names = ["sglang_eagle3.log", "sglang_plain_tp0.log", "sglang_dp_attention_mtp.log", "sglang_dp_ranks_plain.log",
             "sglang_ep_swa.log", "sglang_mtp_mamba_npu.log"]
    f = tmp_path / "all.log"
    f.write_text("".join(lines(*names)))
    whole = parse_log(lines(*names)).summary
    assert same(scan_file(str(f), workers=workers, min_bytes=0).summary(), whole)
    for cut in range(len(lines(*names)) + 1):
        head = scan_log(lines(*names)[:cut])
        head.scan.extend(scan_log(lines(*names)[cut:], "sglang", continues=True).scan)
        assert same(head.scan.summary("sglang", whole.skipped_lines), whole), f"cut at line {cut}"


@pytest.mark.parametrize("workers", [2, 4])
def test_records_written_in_parallel_equal_the_one_pass_records(tmp_path, workers):
    import io

    from decodescope.serverstats.logscan import copy_scanned_records

    names = ["sglang_eagle3.log", "sglang_plain_tp0.log", "sglang_dp_attention_mtp.log", "sglang_prefill_only.log"]
    f = tmp_path / "all.log"
    f.write_text("".join(lines(*names)))
    (tmp_path / "records").mkdir()
    result = scan_file(str(f), workers=workers, min_bytes=0, records=str(tmp_path / "records"))
    assert len(result.parts) == workers
    out = io.BytesIO()
    copy_scanned_records(result, out)
    got = json.loads(b"[" + out.getvalue() + b"]")
    whole = parse_log(lines(*names)).records
    assert got == [r.to_dict() for r in whole]
    assert sum(r["warmup"] for r in got) == 1  # the EAGLE3 window after the idle prefill


@pytest.mark.parametrize("names,engine", [
    (["vllm_mtp_dual_nvlink.log", "vllm_startup_banner.log", "vllm_dflash_pid1.log", "vllm_mtp_pid5020.log"], "vllm"),
    (["vllm_engine_init_no_spec.log", "vllm_v0_no_spec.log", "vllm_engine_init_no_spec.log", "vllm_v0_no_spec.log"], "vllm"),
    (["llamacpp_pid_prefix_mtp.log", "llamacpp_server_listening.log", "llamacpp_eagle3_mean_len.log"], "llamacpp"),
])
def test_every_cut_of_a_multi_run_log_joins_into_the_same_segments(names, engine):
    log = lines(*names)
    whole = parse_log(log, year=2025).summary
    assert len(whole.segments) >= 2
    for cut in range(len(log) + 1):
        after = [x for x in log[cut:] if "draft acceptance" in x or " eval time" in x or "statistics " in x]
        if after and " eval time" not in after[0] and any(" eval time" in x for x in log[:cut]):
            continue  # a cut inside a request's eval / draft / statistics lines loses their pairing (known)
        head = scan_log(log[:cut], engine, 2025)
        head.scan.extend(scan_log(log[cut:], engine, 2025, continues=True).scan)
        got = head.scan.summary(engine, whole.skipped_lines, whole.rejected_lines)
        assert same(got, whole), f"cut at line {cut}"
