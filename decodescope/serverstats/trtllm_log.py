"""TensorRT-LLM's per-iteration log line (PyTorch backend, `print_iter_log: true`).

Format, from tensorrt_llm/_torch/pyexecutor/py_executor.py `_profiler` / `profile_step`
(https://github.com/NVIDIA/TensorRT-LLM), every known version:

    [04/28/2025-09:56:44] [TRT-LLM] [I] iter = 198, global_rank = 0, rank = 0,
    currank_total_requests = 0/0, elapsed_time = 0.00506s, timestamp = 2025-04-28 09:56:44,
    num_scheduled_requests: 10, states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0,
    'num_generation_tokens': 16}

(one line). Until April 2025 without `num_scheduled_requests` (TensorRT-LLM#3914); later
`elapsed_time = Xs` became `host_step_time = Xms, prev_device_step_time = Yms` (or N/A),
and fields such as kv_cache_util, cached_kv_len and num_active were added; the parser
keeps whatever `key = value` / `key: value` pieces a line has. Only rank 0 logs unless
TLLM_PROFILE_LOG_RANKS says otherwise.

One line is one executor iteration, a window of one forward step:
- its wall time is `elapsed_time` (s) or `host_step_time` (ms): the time between two
  iterations' starts, host and GPU, so in a generation-only iteration it is the round
  time a request sees;
- an iteration with context requests (`num_ctx_requests` > 0) is a prefill record:
  its time is mostly the prompt's;
- a generation-only iteration schedules `num_scheduled_requests` requests, each
  verified once. `num_generation_tokens` counts the tokens fed in: one per request,
  plus its draft tokens, over the batch padded up to a CUDA-graph size (TensorRT-LLM#3914:
  16 for 10 requests). A padded batch is below twice the requests (graph sizes grow by
  at most 2x), while drafting k >= 1 tokens per request feeds at least twice as many;
  so fewer than 2 x requests tokens means no draft token was verified, every request
  made exactly one token, accept length 1 and gen tok/s = requests / wall time. With
  drafts the line does not say how many were accepted: no rate (round time and
  requests are still in its fields). A graph-size list of one's own with larger steps
  can only cost a rate this way, never give a wrong one: drafts always feed >= 2x.

The same iterations as JSON, one `IterationStats` object per line: what trtllm-serve's
`/metrics` returns (a JSON list of the iterations since the last call, with
`enable_iter_perf_stats`; `jq -c '.[]'` puts one per line), what the executor API's
get_stats gives and trtllm-bench's iteration log writes. Fields used
(tensorrt_llm/_torch/pyexecutor/py_executor.py `_update_iter_stats`, the C++ executor's
IterationStats): `iterLatencyMS` (or `hostStepTimeMS`, one executor loop, where present:
under the PyTorch overlap scheduler iterLatencyMS spans about two loops, TensorRT-LLM#14127),
`inflightBatchingStats` {numContextRequests, numGenRequests, numScheduledRequests,
avgNumDecodedTokensPerIter} and `specDecodingStats` (null when no speculative config:
PyExecutor._get_init_iter_stats creates it whenever one is set). Tokens per generation
request per iteration = the accept length: 1 + specDecodingStats' numAcceptedTokens /
numGenRequests (its acceptanceLength where the counts are missing), else the TensorRT backend's
avgNumDecodedTokensPerIter when >= 1, else 1 when specDecodingStats is null (the
PyTorch backend leaves avgNumDecodedTokensPerIter at 0). gen tok/s = numGenRequests x
that / the iteration's time.
"""

import json
import re

from decodescope.serverstats.logvalues import Parsed, checked, count, local_epoch, number

MARKER = "iter = "  # every version's message starts with it
JSON_MARKER = '"iterLatencyMS":'  # in every IterationStats object
_STAMP = re.compile(r"\[(\d\d)/(\d\d)/(\d{4})-(\d\d:\d\d:\d\d)\] ")  # the logger's "[%m/%d/%Y-%H:%M:%S] "
_STATES = re.compile(r"states = \{([^}]*)\}")
_STATE = re.compile(r"'(\w+)': (-?[\d.]+(?:e-?\d+)?)")
_SECONDS = {"elapsed_time": 1.0, "host_step_time": 1e-3}  # the wall-time fields, and their unit in s


def parse_trtllm(line: str) -> Parsed | None:
    if JSON_MARKER in line:
        return parse_stats_json(line)
    at = line.find(MARKER)
    if at < 0 or "states = {" not in line:
        return None
    fields = _fields(line[at:])
    if not isinstance(fields.get("iter"), int):
        return None
    step_s = _step_s(fields)
    ctx = fields.get("num_ctx_requests")
    requests = fields.get("num_scheduled_requests")
    tokens = fields.get("num_generation_tokens")
    if not isinstance(ctx, int):
        return None
    if requests is not None:
        requests = checked(count(requests), None, None)[0]
    time_s = _time(line[:at], fields.get("timestamp"))
    rank = f"rank {fields['global_rank']}" if isinstance(fields.get("global_rank"), int) else None
    if ctx > 0:
        return Parsed("prefill", time_s, rank, fields, None, None)
    accept = gen = None
    if requests == 0:
        gen = 0.0  # an idle iteration
    elif requests and isinstance(tokens, int) and count(tokens) < 2 * requests and step_s:
        accept, gen = 1.0, requests / step_s
    return Parsed("decode", time_s, rank, fields, *checked(None, accept, gen)[1:])


def _fields(msg: str) -> dict:
    """Every piece of the message: 'key = value' or 'key: value', the states dict's keys
    flattened in; wall times as numbers in the unit their key names (elapsed_time in s,
    host_step_time / prev_device_step_time in ms, 'N/A' kept as text)."""
    fields = {}
    m = _STATES.search(msg)
    rest = msg if m is None else msg[: m.start()] + msg[m.end() :]
    for piece in rest.split(", "):
        key, sep, text = piece.partition(" = ")
        if not sep:
            key, sep, text = piece.partition(": ")
        if sep and key.strip():
            fields[key.strip()] = _value(key.strip(), text.strip())
    if m is not None:
        for key, text in _STATE.findall(m.group(1)):
            fields[key] = number(text)
    return fields


def _value(key: str, text: str):
    if key == "timestamp" or "/" in text:
        return text  # "2025-04-28 09:56:44", "0/0"
    if text.endswith("ms"):
        text = text[:-2]
    elif key == "elapsed_time" and text.endswith("s"):
        text = text[:-1]
    return number(text)


def _step_s(fields: dict) -> float | None:
    """The iteration's wall time in seconds, or None when the line has none that reads."""
    for key, unit in _SECONDS.items():
        v = fields.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1e9:
            return v * unit
    return None


def _time(head: str, stamp) -> float | None:
    """Epoch seconds: the message's `timestamp = YYYY-mm-dd HH:MM:SS`, else the logger's stamp."""
    if isinstance(stamp, str):
        t = local_epoch(stamp)
        if t is not None:
            return t
    m = _STAMP.search(head)
    return local_epoch(f"{m.group(3)}-{m.group(1)}-{m.group(2)} {m.group(4)}") if m else None


def parse_stats_json(line: str) -> Parsed | None:
    """One IterationStats JSON object (a line of a JSON list keeps its ',' / '[' / ']')."""
    text = line.strip().strip("`").strip().removeprefix("[").removesuffix(",").removesuffix("]")
    try:
        obj = json.loads(text)
    except ValueError:
        return None  # not one whole object (several on a line, or cut)
    return stats_record(obj)


def stats_record(obj) -> Parsed | None:
    """The record of one IterationStats object; None when it is not one."""
    if not isinstance(obj, dict) or not isinstance(obj.get("inflightBatchingStats"), dict):
        return None
    # the batch counts at the top, beside the iteration's own figures; kvCacheStats and
    # specDecodingStats (whose iterLatencyMS is the drafter's) stay nested
    fields = {k: v for k, v in obj.items() if k != "inflightBatchingStats"}
    fields.update(obj["inflightBatchingStats"])
    ctx, gen_reqs = fields.get("numContextRequests"), fields.get("numGenRequests")
    if not (isinstance(ctx, int) and isinstance(gen_reqs, int)):
        return None
    checked(count(fields.get("numScheduledRequests", 0)), None, None)
    time_s = _json_time(fields.get("timestamp"))
    # one object per attention-DP rank since TensorRT-LLM#13649, each with its own requests
    dp = fields.get("attentionDpRank")
    rank = f"attention DP {dp}" if isinstance(dp, int) and not isinstance(dp, bool) else None
    if ctx > 0:
        return Parsed("prefill", time_s, rank, fields, None, None)
    step_s = json_step_s(fields)
    accept = json_accept(fields)
    gen = None
    if gen_reqs == 0:
        gen = 0.0
    elif step_s and accept is not None:
        gen = count(gen_reqs) * accept / step_s
    return Parsed("decode", time_s, rank, fields, *checked(None, accept, gen)[1:])


def json_step_s(fields: dict) -> float | None:
    """An IterationStats object's time in seconds: one executor loop where it says so."""
    for key in ("hostStepTimeMS", "iterLatencyMS"):
        v = fields.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1e12:
            return v / 1000
    return None


def json_accept(fields: dict) -> float | None:
    """Tokens per generation request in the iteration (the accept length incl. the bonus
    token), or None when the object does not say. Each generation request makes one token
    plus its accepted draft tokens, so (numGenRequests + numAcceptedTokens) / numGenRequests;
    acceptanceLength averages only the requests that drafted."""
    spec = fields.get("specDecodingStats")
    gen_reqs = fields.get("numGenRequests")
    if isinstance(spec, dict):
        accepted = spec.get("numAcceptedTokens")
        if isinstance(accepted, int) and gen_reqs:
            return (gen_reqs + count(accepted)) / gen_reqs
        length = spec.get("acceptanceLength")
        return float(length) if isinstance(length, (int, float)) and length >= 1 else None
    avg = fields.get("avgNumDecodedTokensPerIter")
    if isinstance(avg, (int, float)) and avg >= 1:
        return float(avg)
    return 1.0 if "specDecodingStats" in fields else None


def _json_time(stamp) -> float | None:
    """Epoch seconds of IterationStats' local 'mm-dd-YYYY HH:MM:SS.ffffff'."""
    if not isinstance(stamp, str) or len(stamp) < 19:
        return None
    t = local_epoch(f"{stamp[6:10]}-{stamp[:2]}-{stamp[3:5]} {stamp[11:19]}")
    if t is not None and stamp[19:20] == ".":
        try:
            t += float("0" + stamp[19:])
        except ValueError:
            pass
    return t
