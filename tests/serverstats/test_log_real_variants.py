"""`log` on more real excerpts (tests/data/logs, URLs in SOURCES): engine versions and
wrappers the first set lacks (docker stamps, DP engines, Ray actors, NPU, 2024 llama.cpp
forms, Ollama under journalctl). Every expectation is read off the lines by hand."""

import io
import json
import subprocess
import sys

import pytest
from test_log_real import LOGS, WIDE, lines, summary

from decodescope.serverstats.serverlog import parse_log


def records(*names: str, year: int = 2025):
    return parse_log(lines(*names), year=year).records


# ---------------------------------------------------------------- vLLM


def test_a_docker_timestamp_before_the_pid_still_separates_two_servers():
    # tt-inference-server#3359 (`docker logs --timestamps`, pid=1) then vllm#43295 (pid=5020):
    # two servers, never one average of 6 tok/s and 1000 tok/s windows
    s = summary("vllm_docker_stamp.log", "vllm_mtp_pid5020.log")
    assert [(g.first_line, g.reason.value) for g in s.segments] == [(1, "log start"), (5, "process change")]
    docker, mtp = s.segments
    # (4.8 + 7.2 + 5.7 + 7.2) / 4 = 6.225 tok/s; per request 4.8/9, 7.2/9, 5.7/10, 7.2/10
    assert docker.gen_tok_s.mean == pytest.approx(6.225)
    assert docker.gen_tok_s_per_req.mean == pytest.approx((4.8 / 9 + 7.2 / 9 + 5.7 / 10 + 7.2 / 10) / 4)
    assert docker.accept_len is None and docker.round_ms is None
    assert (mtp.accept_len.mean, mtp.gen_tok_s.mean) == (pytest.approx(2.65), pytest.approx(1014.6))
    assert {r.process for r in records("vllm_docker_stamp.log")} == {"1"}


def test_a_real_window_that_ran_out_of_requests_is_a_lower_bound():
    # genesis-vllm-patches#24: 28.4 tok/s with Running: 0 (the request ended inside the
    # window), its spec line 2.20, then an idle 0.0 window
    s = summary("vllm_idle_window_spec_mm.log")
    assert s.accept_len.mean == 2.20 and s.accept_len.n == 1
    assert (s.gen_tok_s.mean, s.lower_bound) == (28.4, True)
    assert s.gen_tok_s_per_req is None and s.round_ms is None  # no running count to divide by


def test_two_dp_engines_logging_in_the_same_second():
    # vllm-ascend#1170 (vLLM 0.9.1, DP 2): Engine 000 10.3 and Engine 001 10.0 tok/s, both
    # windows ended idle (Running: 0): lower bounds, per engine (10.3 + 10.0) / 2 = 10.15, and the
    # server at least 10.3 + 10.0 = 20.3 tok/s (each engine ran at least its window's rate)
    s = summary("vllm_dp_two_engines.log")
    assert (s.dp_ranks, s.lower_bound) == (2, True)
    assert s.gen_tok_s.mean == pytest.approx(10.15) and s.gen_tok_s.n == 2
    total = s.gen_tok_s_total
    assert (total.mean, total.min, total.max, total.n) == pytest.approx((20.3, 20.3, 20.3, 2))
    assert s.segments[0].lower_bound and s.segments[0].gen_tok_s_total == total
    path = str(LOGS / "vllm_dp_two_engines.log")
    out = json.loads(subprocess.run([sys.executable, "-m", "decodescope", "log", path, "--json"],
                                    capture_output=True, timeout=60, check=True).stdout)
    assert out["summary"]["gen_tok_s_total"]["mean"] == pytest.approx(20.3) and out["summary"]["lower_bound"]
    table = subprocess.run([sys.executable, "-m", "decodescope", "log", path], capture_output=True,
                           timeout=60, env=WIDE, check=True).stdout.decode()
    row = next(x for x in table.splitlines() if "server total over DP ranks" in x)
    assert "20.30" in row and "lower bounds" in table  # marked as the per-engine rates are
    assert [r.rank for r in records("vllm_dp_two_engines.log")] == ["Engine 000", "Engine 001"]
    assert s.skipped_lines == 3  # the HTTP line and two EngineCore traceback lines


def test_one_api_server_per_dp_engine_is_one_run_not_a_restart():
    # vllm-ascend#12521: pid 95669 logs Engine 002 and pid 95673 Engine 004 in the same second,
    # each with its own spec line: two DP ranks of one server, not two runs. Total 43.3 + 45.0
    # = 88.3 tok/s; per engine and per request (1 each) 44.15; accept (2.87 + 2.98) / 2 = 2.925;
    # round 2.925 / 44.15 = 66.25 ms
    s = summary("vllm_dp_api_servers_interleaved.log")
    assert len(s.segments) == 1 and s.dp_ranks == 2
    assert s.gen_tok_s_total.mean == pytest.approx(88.3) and s.gen_tok_s_per_req.mean == pytest.approx(44.15)
    assert s.accept_len.mean == pytest.approx(2.925)
    assert s.round_ms == pytest.approx(1000 * 2.925 / 44.15)
    # new processes are still a restart after a pause (club-3090#93's pid 1 on 05-07, then these
    # on 07-20) or with a rank-less first line (vllm#43295's pid 5020 opens with a spec line)
    three = summary("vllm_dflash_pid1.log", "vllm_dp_api_servers_interleaved.log", "vllm_mtp_pid5020.log")
    assert [(g.first_line, g.reason.value) for g in three.segments] == [
        (2, "log start"), (7, "process change"), (11, "process change")]
    assert three.segments[1].gen_tok_s_total.mean == pytest.approx(88.3)


def test_dp_engines_each_with_its_spec_line():
    # vllm#24049: Engine 000, 001, 002 of one API server, each window ended idle (Running: 0):
    # lower bounds, per engine (16.0 + 15.9 + 16.0) / 3 = 15.967; accept (1.77 + 2.80) / 2 = 2.285
    s = summary("vllm_dp_spec_per_engine.log")
    assert (s.dp_ranks, s.lower_bound) == (3, True)
    assert s.gen_tok_s.mean == pytest.approx(47.9 / 3) and s.accept_len.mean == pytest.approx(2.285)
    # the server: at least 16.0 + 15.9 + 16.0 = 47.9 tok/s, over the 3 windows
    assert (s.gen_tok_s_total.mean, s.gen_tok_s_total.n) == (pytest.approx(47.9), 3)
    assert s.round_ms is None  # no window with requests still running: no per-request rate


@pytest.mark.parametrize("cut", range(0, 15))
def test_every_cut_of_interleaved_api_servers_joins_into_one_pass(cut):
    from test_logscan import same

    from decodescope.serverstats.logscan import scan_log

    log = lines("vllm_dflash_pid1.log", "vllm_dp_api_servers_interleaved.log", "vllm_mtp_pid5020.log")
    whole = parse_log(log, year=2025).summary
    head = scan_log(log[:cut], "vllm", 2025)
    head.scan.extend(scan_log(log[cut:], "vllm", 2025, continues=True).scan)
    assert same(head.scan.summary("vllm", whole.skipped_lines, whole.rejected_lines), whole)


def test_an_engine_001_with_spec_lines_and_new_fields():
    # vllm-ascend#11876: "Deferred" and "External prefix cache hit rate" fields are kept;
    # accept (1.92 + 1.90) / 2 = 1.91; the 5.9 tok/s window has Running: 0 (idle) so the
    # steady figure is 34.9 tok/s at 2 requests = 17.45 per request, paired with its own
    # spec line: round = 1.92 / 17.45 = 110.0 ms
    s = summary("vllm_engine001_spec_deferred.log")
    assert s.accept_len.mean == pytest.approx(1.91)
    assert (s.gen_tok_s.mean, s.gen_tok_s_per_req.mean) == (34.9, pytest.approx(17.45))
    assert s.round_ms == pytest.approx(1000 * 1.92 / 17.45)
    last = [r for r in records("vllm_engine001_spec_deferred.log") if r.kind == "stats"][-1]
    assert (last.rank, last.fields["Deferred"], last.fields["External prefix cache hit rate"]) == ("Engine 001", 1, 100.0)


def test_vllm_on_cpu_at_one_request():
    # vllm#50219 (s390x): (1.2 + 1.2 + 1.3 + 1.3 + 1.3) / 5 = 1.26 tok/s at 1 request
    s = summary("vllm_cpu_s390x.log")
    assert s.gen_tok_s.mean == pytest.approx(1.26) and s.gen_tok_s_per_req.mean == pytest.approx(1.26)
    assert s.warmup_windows == 0


def test_an_external_lb_dp_api_server_line():
    # vllm#43222: "(APIServer_DP1 pid=N)" before an Engine 001 line that ended idle
    s = summary("vllm_apiserver_dp_prefix.log")
    assert (s.gen_tok_s.mean, s.lower_bound) == (2226.2, True)
    rec = records("vllm_apiserver_dp_prefix.log")[0]
    assert (rec.rank, rec.process) == ("Engine 001", "2646203")


# ---------------------------------------------------------------- SGLang


def test_sglang_npu_accept_len_next_to_accept_rate():
    # sgl-kernel-npu#608 (TP0 EP0): accept (3.05 + 2.63 + 2.83) / 3 = 2.8367 from every window;
    # the 239.06 tok/s window right after an 8-request prefill is warm-up; steady
    # (631.96 + 648.87) / 2 = 640.415 tok/s, per request 631.96/23 and 648.87/22 -> 28.485;
    # round = steady accept (2.63 + 2.83) / 2 = 2.73 tokens / 28.485 tok/s = 95.84 ms
    s = summary("sglang_npu_ep_accept_rate.log")
    assert s.accept_len.mean == pytest.approx(8.51 / 3)
    assert s.gen_tok_s.mean == pytest.approx(640.415) and s.warmup_windows == 1
    per_req = (631.96 / 23 + 648.87 / 22) / 2
    assert s.gen_tok_s_per_req.mean == pytest.approx(per_req)
    assert s.round_ms == pytest.approx(1000 * 2.73 / per_req)
    assert {r.rank for r in records("sglang_npu_ep_accept_rate.log")} == {"TP0 EP0"}


def test_sglang_pd_decode_server_dp_ranks_in_one_second():
    # sglang#17392 (PD decode server, DP attention + EP): DP0 1774.38 at 21, DP2 1392.52 at 20,
    # DP3 1612.16 at 21 requests in the same second: server total 4779.06 tok/s, per rank
    # 4779.06 / 3 = 1593.02, per request (84.494 + 69.626 + 76.770) / 3 = 76.963
    s = summary("sglang_pd_decode_dp_ep.log")
    assert (s.dp_ranks, s.gen_tok_s_total.mean) == (3, pytest.approx(4779.06))
    assert s.gen_tok_s.mean == pytest.approx(4779.06 / 3)
    assert s.gen_tok_s_per_req.mean == pytest.approx((1774.38 / 21 + 1392.52 / 20 + 1612.16 / 21) / 3)
    recs = records("sglang_pd_decode_dp_ep.log")
    assert [r.rank for r in recs] == ["DP0 TP0 EP0", "DP2 TP2 EP2", "DP3 TP3 EP3"]
    assert {r.fields["#retracted-req"] for r in recs} == {0} and s.accept_len is None


def test_sglang_cuda_graph_switching_on_mid_run():
    # sglang#13023: 8 windows, cuda graph False at 46 and 36 requests, True below;
    # sum 7149.52 tok/s -> 893.69 mean
    s = summary("sglang_cuda_graph_switch.log")
    assert s.gen_tok_s.mean == pytest.approx(7149.52 / 8) and s.gen_tok_s.n == 8
    graph = [r.fields["cuda graph"] for r in records("sglang_cuda_graph_switch.log")]
    assert graph == [False, False] + [True] * 6


def test_sglang_under_a_ray_actor_prefix():
    # OpenClaw-RL#44: "(SGLangEngine pid=N) [stamp TP0] Decode batch, ..., #queue-req: 0,"
    # 7 windows at 6 requests: sum 9607.54 tok/s -> 1372.506 mean, 228.751 per request
    s = summary("sglang_ray_actor_prefix.log")
    assert s.gen_tok_s.mean == pytest.approx(9607.54 / 7)
    assert s.gen_tok_s_per_req.mean == pytest.approx(9607.54 / 7 / 6)
    recs = records("sglang_ray_actor_prefix.log")
    assert {r.rank for r in recs} == {"TP0"} and all(r.time_s is not None for r in recs)
    assert recs[-1].time_s - recs[0].time_s == 1.0  # 13:53:37 -> 13:53:38


def test_sglang_without_rank_between_http_and_prefill_lines():
    # sglang#22166: one decode line (1635.11 tok/s at 32 requests), three prefill lines
    # whose rate is input throughput (not generation), six HTTP lines skipped
    s = summary("sglang_no_rank_prefill_mix.log")
    assert s.gen_tok_s.mean == 1635.11 and s.gen_tok_s_per_req.mean == pytest.approx(1635.11 / 32)
    assert [r.kind for r in records("sglang_no_rank_prefill_mix.log")] == ["decode"] + ["prefill"] * 3
    assert s.skipped_lines == 6


def test_sglang_time_only_stamp_and_swa_fields():
    # sglang#26248: 7 windows at 6 requests; the first (24.33) is warm-up by the rule
    # (first window slower than 1.5x the median of the rest); steady sum 194.85 / 6 = 32.475
    s = summary("sglang_time_only_swa.log")
    assert s.gen_tok_s.mean == pytest.approx(194.85 / 6) and s.warmup_windows == 1
    assert records("sglang_time_only_swa.log")[0].fields["full token usage"] == 0.92


def test_sglang_custom_logging_format_keeps_its_clock():
    # fastrl#4: "2025-12-04 20:35:53 INFO 151972 [scheduler_metrics_mixin.py:287] Decode batch. ..."
    # accept 1.00 on both windows (no draft token accepted): (5452.63 + 5399.46) / 2 = 5426.045 tok/s
    # at 48 requests -> 113.04 per request, round 1.00 / 113.04 = 8.85 ms
    s = summary("sglang_custom_log_format.log")
    assert s.accept_len.mean == 1.0 and s.gen_tok_s.mean == pytest.approx(5426.045)
    assert s.round_ms == pytest.approx(1000 * 48 / 5426.045)
    assert all(r.time_s is not None for r in records("sglang_custom_log_format.log"))


# ---------------------------------------------------------------- llama.cpp and Ollama


def test_llamacpp_n_decoded_progress_lines_are_llamacpp(tmp_path):
    # club-3090#931: seven "n_decoded = N, tg = ... t/s" lines (the 2025 name of n_gen),
    # then the request's timing: 2000 tokens at 21.73 tok/s
    recs = records("llamacpp_n_decoded_progress.log")
    progress = [r for r in recs if "n_decoded" in r.fields]
    assert [r.fields["n_decoded"] for r in progress] == [1546, 1619, 1703, 1763, 1820, 1878, 1949]
    assert progress[0].fields["tg"] == 21.44 and progress[0].fields["tg_3s"] == 21.05
    assert summary("llamacpp_n_decoded_progress.log").gen_tok_s_per_req.mean == 21.73
    # a log caught mid-request, progress lines only, is still a llama.cpp log
    f = tmp_path / "progress.log"
    f.write_text("".join(lines("llamacpp_n_decoded_progress.log")[:7]))
    p = subprocess.run([sys.executable, "-m", "decodescope", "log", str(f)], capture_output=True, timeout=60, env=WIDE)
    assert p.returncode == 0, p.stderr


def test_llamacpp_graphs_reused_line_and_mean_len():
    # club-3090#1124: 96 tokens at 16.58 tok/s, mean len 2.38 -> round 2.38 / 16.58 = 143.5 ms
    # (the counts agree: 96 - 55 accepted = 41 rounds, 5729.20 ms / 41 = 139.7 ms)
    s = summary("llamacpp_graphs_reused_mean_len.log")
    assert (s.accept_len.mean, s.gen_tok_s_per_req.mean) == (2.38, 16.58)
    assert s.round_ms == pytest.approx(1000 * 2.38 / 16.58)
    # the next request's progress lines, padded as llama.cpp prints them: "n_gen =    100, tg =  19.04 t/s"
    progress = [(r.line_no, r.fields["n_gen"], r.fields["tg"]) for r in records("llamacpp_graphs_reused_mean_len.log")
                if "n_gen" in r.fields]
    assert progress == [(9, 100, 19.04), (10, 158, 18.88), (11, 212, 18.39), (12, 259, 17.74)]


def test_llamacpp_2024_prompt_eval_line_with_padded_equals():
    # llama.cpp#9013: "prompt eval time     =      15.62 ms /    12 tokens (..., 768.49 tokens
    # per second) | tid=... timestamp=1723569622 id_slot=0 id_task=0 ..."
    recs = records("llamacpp_2024_info_tail.log")
    assert [(r.line_no, r.kind) for r in recs] == [(1, "prefill"), (2, "decode"), (3, "stats")]
    assert recs[0].fields["tokens_per_second"] == 768.49 and recs[0].rank == "slot 0"
    assert recs[1].gen_tok_s == 245.13 and recs[1].time_s == 1723569622.0


def test_llamacpp_json_log_format():
    # llama.cpp#7637 (--log-format json, 2024): slot, task and stamp come from the JSON keys;
    # generation 25 runs at 7.02 tok/s
    recs = records("llamacpp_json_log_format.log")
    assert [(r.line_no, r.kind) for r in recs] == [(1, "prefill"), (2, "decode"), (3, "stats")]
    assert all((r.rank, r.fields["task"], r.time_s) == ("slot 0", 19, 1717067386.0) for r in recs)
    assert recs[0].fields["tokens_per_second"] == 10.06 and recs[1].gen_tok_s == 7.02


def test_llama_server_lines_between_proxy_lines():
    # llama-swap#35: two requests, 34 tokens at 2.54 tok/s after a 22 s prompt (warm-up by
    # the rule: first window, far slower than the other) and 13 tokens at 37.98 tok/s
    s = summary("llamacpp_llama_swap_interleaved.log")
    assert s.gen_tok_s_per_req.mean == 37.98 and s.warmup_windows == 1
    assert [r.gen_tok_s for r in records("llamacpp_llama_swap_interleaved.log") if r.kind == "decode"] == [2.54, 37.98]


def test_ollama_journal_eval_of_one_run_at_inf_tokens_per_second():
    # llama-coder#3 (Ollama 2023 under journalctl): "eval time = 0.00 ms / 1 runs (..., inf
    # tokens per second)": a record without a rate, not an error; no decode figure at all
    s = summary("ollama_journalctl_inf_rate.log")
    assert s.gen_tok_s_per_req is None and s.rejected_lines == 0
    dec = [r for r in records("ollama_journalctl_inf_rate.log") if r.kind == "decode"]
    assert [(d.gen_tok_s, d.fields["tokens"], d.fields["time_ms"]) for d in dec] == [(None, 1, 0.0)]
    p = subprocess.run([sys.executable, "-m", "decodescope", "log", str(LOGS / "ollama_journalctl_inf_rate.log")],
                       capture_output=True, timeout=60, env=WIDE)
    assert p.returncode == 0 and b"whose decode lines give no rate (1 decode, 1 prefill, 1 stats)" in p.stdout


# ---------------------------------------------------------------- whole files, line ends, colours


NEW = ["vllm_docker_stamp.log", "vllm_idle_window_spec_mm.log", "vllm_dp_two_engines.log",
       "vllm_apiserver_dp_prefix.log", "vllm_cpu_s390x.log", "vllm_engine001_spec_deferred.log",
       "sglang_no_rank_prefill_mix.log", "sglang_cuda_graph_switch.log", "sglang_npu_ep_accept_rate.log",
       "sglang_ray_actor_prefix.log", "sglang_custom_log_format.log", "sglang_time_only_swa.log",
       "llamacpp_n_decoded_progress.log", "llamacpp_graphs_reused_mean_len.log", "llamacpp_json_log_format.log",
       "llamacpp_llama_swap_interleaved.log", "ollama_journalctl_inf_rate.log", "llamacpp_2024_info_tail.log",
       "sglang_pd_decode_dp_ep.log", "vllm_dp_spec_per_engine.log", "vllm_dp_api_servers_interleaved.log"]


@pytest.mark.parametrize("name", NEW)
def test_table_and_json_agree_on_every_new_excerpt(name):
    path = str(LOGS / name)
    out = json.loads(subprocess.run([sys.executable, "-m", "decodescope", "log", path, "--json"],
                                    capture_output=True, timeout=60, check=True).stdout)
    table = subprocess.run([sys.executable, "-m", "decodescope", "log", path], capture_output=True,
                           timeout=60, env=WIDE, check=True).stdout.decode()
    for key in ("gen_tok_s", "gen_tok_s_total", "gen_tok_s_per_req", "accept_len"):
        if out["summary"][key] is not None:
            assert f"{out['summary'][key]['mean']:.2f}" in table, (key, table)
    summary(name)  # the one-pass scan agrees with the full parse


@pytest.mark.parametrize("name", ["vllm_engine001_spec_deferred.log", "sglang_npu_ep_accept_rate.log",
                                  "llamacpp_graphs_reused_mean_len.log"])
def test_windows_line_ends_read_the_same(name):
    crlf = [x.replace("\n", "\r\n") for x in lines(name)]
    a, b = parse_log(lines(name), year=2025), parse_log(crlf, year=2025)
    assert a.summary == b.summary and [r.to_dict() for r in a.records] == [r.to_dict() for r in b.records]


def _vllm_coloured(line: str) -> str:
    # vllm/logging_utils/formatter.py ColoredFormatter: level in its colour, the stamp and
    # [file:line] in grey (\033[90m), each followed by a reset
    head, level, rest = line.partition("INFO ")
    stamp, file_, msg = rest[:14], rest[15:].split("] ", 1)[0] + "]", rest[15:].split("] ", 1)[1]
    return f"{head}\033[32mINFO\033[0m \033[90m{stamp}\033[0m \033[90m{file_}\033[0m {msg}"


def _llamacpp_coloured(line: str) -> str:
    # llama.cpp common/log.cpp with colours on: the elapsed stamp in blue, "I " in green
    stamp, _, msg = line.partition(" I ")
    return f"\033[34m{stamp}\033[0m \033[32mI \033[0m{msg}"


@pytest.mark.parametrize("name,colour", [("vllm_engine001_spec_deferred.log", _vllm_coloured),
                                         ("llamacpp_graphs_reused_mean_len.log", _llamacpp_coloured)])
def test_ansi_colours_of_a_terminal_log_read_the_same(name, colour):
    # the engines colour their log prefix on a terminal (and llama.cpp its --log-file too);
    # the real lines, coloured as each engine's formatter source does, read the same
    plain = lines(name)
    coloured = [colour(x) if (" I " in x or "INFO 0" in x) else x for x in plain]
    assert any("\033[" in x for x in coloured)
    a, b = parse_log(plain, year=2025), parse_log(coloured, year=2025)
    assert a.summary == b.summary and [r.to_dict() for r in a.records] == [r.to_dict() for r in b.records]


SGLANG_NEW = ["sglang_custom_log_format.log", "sglang_npu_ep_accept_rate.log", "sglang_pd_decode_dp_ep.log",
              "sglang_ray_actor_prefix.log", "sglang_cuda_graph_switch.log", "sglang_time_only_swa.log"]


def _joined(log, cut):
    from decodescope.serverstats.logscan import scan_log

    head = scan_log(log[:cut])
    head.scan.extend(scan_log(log[cut:], "sglang", continues=True).scan)
    return head.scan


def test_every_cut_of_the_new_sglang_excerpts_joins_into_one_pass(tmp_path):
    from test_logscan import same

    from decodescope.serverstats.logscan import scan_file

    log = lines(*SGLANG_NEW)
    whole = parse_log(log).summary
    assert len(whole.segments) >= 3  # the clock goes back between excerpts of different days
    for cut in range(len(log) + 1):
        assert same(_joined(log, cut).summary("sglang", whole.skipped_lines), whole), f"cut at line {cut}"
    f = tmp_path / "all.log"
    f.write_text("".join(log))
    assert same(scan_file(str(f), workers=3, min_bytes=0).summary(), whole)


def test_a_cut_before_stamp_less_lines_then_an_older_stamp(tmp_path):
    from test_logscan import same

    from decodescope.serverstats.logscan import _line_starts, copy_scanned_records, scan_file, scan_log

    # sglang#26248's [03:51:54] lines between OpenClaw-RL#44 (2026-03-22) and sglang#13023 (2025-11-11):
    # read in one pass the stamp-less lines join the 2026 run and 2025-11-11 starts a new one
    log = lines("sglang_ray_actor_prefix.log", "sglang_time_only_swa.log", "sglang_cuda_graph_switch.log")
    whole = parse_log(log)
    assert [(g.first_line, g.reason.value) for g in whole.summary.segments] == [(1, "log start"), (15, "time went back")]
    # a stretch cut before line 8 (the first [03:51:54] line) judges its head by its first stamp
    # (line 15) and would start the new segment at line 8: the join says it cannot, and refuses
    head, tail = scan_log(log[:7]), scan_log(log[7:], "sglang", continues=True)
    assert not head.scan.joins(tail.scan)
    with pytest.raises(ValueError):
        head.scan.extend(tail.scan)
    # scan_file with a byte range starting at line 8 scans the file in one pass instead
    f = tmp_path / "all.log"
    f.write_text("".join(log))
    at8 = len("".join(log[:7]).encode())
    workers = next(n for n in range(2, 40) if at8 in _line_starts(str(f), f.stat().st_size, n))
    out = {}
    for w in (1, workers):
        (tmp_path / str(w)).mkdir()
        result = scan_file(str(f), workers=w, min_bytes=0, records=str(tmp_path / str(w)))
        records = io.BytesIO()
        copy_scanned_records(result, records)
        out[w] = (result.summary().to_dict(), records.getvalue())
    assert out[workers] == out[1]
    assert same(result.summary(), whole.summary)
    assert json.loads(b"[" + out[1][1] + b"]") == [r.to_dict() for r in whole.records]
