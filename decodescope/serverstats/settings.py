"""The deployment as the server's own start-up lines state it: one `Settings` per run.

`read_settings(lines)` streams a log once. SGLang's `server_args=ServerArgs(…)`, vLLM's
`non-default args: {…}` / `args: Namespace(…)` / `… engine (vX) with config: …` and
llama.cpp's device, file-type, offload and context lines each fill some fields; a field the
log never states stays None (a default the log prints as `auto` counts as not stated). A
start-up line that repeats with other values (a restart with other settings) opens a new
segment; the same line repeated per rank or per engine core does not. Lines that match a
rule of findings.toml are kept with their line number as evidence for `findings()`.
TensorRT-LLM states only its version (`[TensorRT-LLM] TensorRT-LLM version: X`)."""

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum

from decodescope.serverstats import pyrepr

MAX_LINE = 65536  # characters read of one line; SGLang's ServerArgs line runs to ~10 k


class SpecMethod(StrEnum):
    NONE = "none"
    EAGLE = "eagle"
    EAGLE3 = "eagle3"
    MTP = "mtp"
    DRAFT = "draft"
    NGRAM = "ngram"
    MEDUSA = "medusa"
    DFLASH = "dflash"  # block-diffusion drafter, one parallel draft pass (vLLM and SGLang, 2026)


@dataclass(frozen=True)
class Settings:
    engine: str | None = None  # one of logformats.ENGINES: "sglang" | "vllm" | "llamacpp" | "trtllm"
    version: str | None = None
    model: str | None = None  # model id or path as logged
    tp: int | None = None
    pp: int | None = None
    dp: int | None = None
    ep: int | None = None
    dtype: str | None = None  # weights' compute dtype: bf16 fp16 fp32, else as logged
    quantization: str | None = None  # as logged: gptq, fp8, "Q4_K - Medium", ...
    kv_cache_dtype: str | None = None
    spec_method: SpecMethod | None = None
    spec_steps: int | None = None  # draft tokens per round
    cuda_graphs: bool | None = None
    attention_backend: str | None = None
    gpus: tuple[str, ...] | None = None  # device names as logged
    gpu_count: int | None = None
    offloaded_layers: int | None = None  # llama.cpp: layers on the GPU(s) ...
    total_layers: int | None = None  # ... of this many (repeating layers + output)
    context: int | None = None  # tokens

    def to_json(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["spec_method"] = self.spec_method.value if self.spec_method else None
        out["gpus"] = list(self.gpus) if self.gpus is not None else None
        return out


@dataclass(frozen=True)
class Note:
    """A line that matched a findings rule: the first one, and how often it recurred."""
    rule: str
    line: int
    text: str
    count: int = 1


@dataclass(frozen=True)
class SettingsSegment:
    first_line: int
    last_line: int
    settings: Settings
    where: dict[str, int] = field(default_factory=dict)  # field -> line that stated it
    notes: tuple[Note, ...] = ()

    def to_json(self) -> dict:
        return {"first_line": self.first_line, "last_line": self.last_line, "settings": self.settings.to_json()}


# ---------------------------------------------------------------- values

_DTYPES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "half": "fp16", "fp16": "fp16",
           "float32": "fp32", "float": "fp32", "fp32": "fp32", "f16": "fp16", "f32": "fp32"}
_SGLANG_SPEC = {"EAGLE": SpecMethod.EAGLE, "EAGLE3": SpecMethod.EAGLE3, "NEXTN": SpecMethod.MTP,
                "MTP": SpecMethod.MTP, "STANDALONE": SpecMethod.DRAFT, "NGRAM": SpecMethod.NGRAM, "DFLASH": SpecMethod.DFLASH,
                "LOOKAHEAD": SpecMethod.NGRAM}


def _dtype(v) -> str | None:
    if not isinstance(v, str) or v.lower() in ("auto", "none", ""):
        return None
    key = v.lower().removeprefix("torch.")
    return _DTYPES.get(key, key)


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _text(v) -> str | None:
    """A stated string value; None, 'auto' and empty say nothing."""
    if v is None or isinstance(v, bool) or str(v).lower() in ("none", "auto", ""):
        return None
    return str(v)


def _vllm_spec(v) -> dict:
    """speculative_config as vLLM prints it: None, a dict, or `SpeculativeConfig(...)`."""
    if v is None or v == "None":
        return {"spec_method": SpecMethod.NONE}
    kv = v if isinstance(v, dict) else pyrepr.call_args(str(v), "SpeculativeConfig") or {}
    method = str(kv.get("method") or "").lower()
    draft = str(kv.get("draft_model") or kv.get("model") or "")
    if method in ("eagle", "eagle3", "medusa", "ngram", "dflash"):
        spec = SpecMethod(method)
    elif method == "mtp" or method.endswith("_mtp"):
        spec = SpecMethod.MTP
    elif draft == "[ngram]":
        spec = SpecMethod.NGRAM
    elif method in ("draft_model", "") and draft:
        spec = SpecMethod.DRAFT
    else:
        return {}
    steps = _int(kv.get("num_spec_tokens", kv.get("num_speculative_tokens")))
    return {"spec_method": spec} | ({"spec_steps": steps} if steps else {})


def _drop_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


# ---------------------------------------------------------------- SGLang


def _sglang_args(line: str) -> dict:
    kv = pyrepr.call_args(line, "ServerArgs") or {}
    u = {"engine": "sglang", "model": _text(kv.get("model_path")), "tp": _int(kv.get("tp_size")),
         "pp": _int(kv.get("pp_size")), "dp": _int(kv.get("dp_size")), "ep": _int(kv.get("ep_size")),
         "dtype": _dtype(kv.get("dtype")), "quantization": _text(kv.get("quantization")),
         "kv_cache_dtype": _dtype(kv.get("kv_cache_dtype")), "context": _int(kv.get("context_length")),
         "attention_backend": _text(kv.get("attention_backend"))}
    if isinstance(kv.get("disable_cuda_graph"), bool):
        u["cuda_graphs"] = not kv["disable_cuda_graph"]
    if "speculative_algorithm" in kv:
        algo = kv["speculative_algorithm"]
        if algo is None:
            u["spec_method"] = SpecMethod.NONE  # step counts printed beside None are inactive
        elif str(algo).upper() in _SGLANG_SPEC:
            u["spec_method"] = _SGLANG_SPEC[str(algo).upper()]
            u["spec_steps"] = _int(kv.get("speculative_num_steps"))
    return _drop_none(u)


_SGLANG_DEFAULT_ATTN = re.compile(r"Attention backend not (?:specified|set)\. Use (\w+) backend by default")
_SGLANG_WEIGHTS = re.compile(r"Load weight end\. type=\w+, dtype=(torch\.\w+)")
_SGLANG_KV = re.compile(r"Using KV cache dtype: (torch\.\w+)")


def _sglang_runtime(line: str) -> dict | None:
    """Lines every SGLang rank prints while loading: the dtype loaded, the KV dtype, graph capture."""
    if m := _SGLANG_WEIGHTS.search(line):
        return {"engine": "sglang", "dtype": _dtype(m[1])}
    if m := _SGLANG_KV.search(line):
        return {"engine": "sglang", "kv_cache_dtype": _dtype(m[1])}
    if "Capture cuda graph end" in line:  # decode CUDA graphs were captured: they are on
        return {"engine": "sglang", "cuda_graphs": True}
    return None


# ---------------------------------------------------------------- vLLM

_VLLM_CONFIG = re.compile(r"engine \(v([^)\s]+)\) with config: ")
_VLLM_VERSION = re.compile(r"vLLM API server version ([\w.+-]+)")
# every TensorRT-LLM process prints it as it imports tensorrt_llm (trtllm-serve's first line)
_TRTLLM_VERSION = re.compile(r"\[TensorRT-LLM\] TensorRT-LLM version: ([\w.+-]+)")
_VLLM_ATTN = re.compile(r"\] Using ([\w -]+?) backend\b")  # `selector.py:51] Using XFormers backend.`


def _vllm_args(kv: dict) -> dict:
    """`non-default args` / `args: Namespace(...)`: the flags as given on the command line."""
    u = {"engine": "vllm", "model": _text(kv.get("model") or kv.get("model_tag")),
         "tp": _int(kv.get("tensor_parallel_size")), "pp": _int(kv.get("pipeline_parallel_size")),
         "dp": _int(kv.get("data_parallel_size")), "dtype": _dtype(kv.get("dtype")),
         "quantization": _text(kv.get("quantization")), "kv_cache_dtype": _dtype(kv.get("kv_cache_dtype")),
         "context": _int(kv.get("max_model_len"))}
    if isinstance(kv.get("enforce_eager"), bool):
        u["cuda_graphs"] = not kv["enforce_eager"]
    if "speculative_config" in kv:
        spec = kv["speculative_config"]
        if isinstance(spec, str) and spec.startswith("{"):
            spec = pyrepr.value(spec.replace("true", "True").replace("false", "False"))
        u |= _vllm_spec(spec)
    elif _text(kv.get("speculative_model")):  # V0 flags
        u |= _vllm_spec({"draft_model": kv["speculative_model"],
                         "num_speculative_tokens": kv.get("num_speculative_tokens")})
    return _drop_none(u)


def _vllm_nondefault(line: str) -> dict:
    text = line.split("non-default args:", 1)[1].strip()
    kv = pyrepr.value(text)
    return _vllm_args(kv if isinstance(kv, dict) else pyrepr.pairs(text.removeprefix("{")))


def _vllm_config(line: str, m: re.Match) -> dict:
    kv = pyrepr.pairs(line[m.end():])
    u = {"engine": "vllm", "version": m[1], "model": _text(kv.get("model")), "dtype": _dtype(kv.get("dtype")),
         "tp": _int(kv.get("tensor_parallel_size")), "pp": _int(kv.get("pipeline_parallel_size")),
         "dp": _int(kv.get("data_parallel_size")), "quantization": _text(kv.get("quantization")),
         "kv_cache_dtype": _dtype(kv.get("kv_cache_dtype")), "context": _int(kv.get("max_seq_len"))}
    if isinstance(kv.get("enforce_eager"), bool):
        u["cuda_graphs"] = not kv["enforce_eager"]
    if "speculative_config" in kv:
        u |= _vllm_spec(kv["speculative_config"])
    return _drop_none(u)


# ---------------------------------------------------------------- llama.cpp

_LC_DEVICES = re.compile(r"found (\d+) (?:CUDA|ROCm|MUSA|SYCL) devices")
_LC_DEVICE = re.compile(r"^\s*Device \d+: (.+?), (?:compute capability|gfx)")
_LC_BUILD = re.compile(r"\b(?:build|version)(?: =|:) b?(\d+) \(")
_LC_MODEL = re.compile(r"loaded meta data with \d+ key-value pairs and \d+ tensors from (.+?) \(version GGUF")
_LC_FTYPE = re.compile(r"(?:print_info: file type|llm_load_print_meta: model ftype)\s+= (.+?)\s*$")
_LC_OFFLOAD = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_LC_CTX_PREFIX = r"(?:llama_context|llama_new_context_with_model|llama_init_from_model): "
_LC_CTX = re.compile(_LC_CTX_PREFIX + r"n_ctx\s+= (\d+)")
_LC_FA = re.compile(_LC_CTX_PREFIX + r"flash_attn\s+= (\w+)")
_LC_KV = re.compile(r"type_k = '(\w+)', type_v = '(\w+)'|K \((\w+)\): +[\d.]+ MiB, V \((\w+)\)")
_LC_DRAFT = re.compile(r"loading draft model '([^']+)'")
_LC_LOAD = re.compile(r"load_model: loading model '([^']+)'")


def _ftype(text: str) -> dict:
    t = text.strip()
    if t.upper() in ("F16", "MOSTLY F16", "BF16", "MOSTLY BF16", "ALL F32"):
        return {"dtype": _dtype(t.split()[-1].lower())}
    return {"quantization": t}


def _kv_pair(k: str, v: str) -> str:
    k, v = _dtype(k) or k, _dtype(v) or v
    return k if k == v else f"{k}/{v}"


def _llamacpp(line: str) -> dict | None:
    if m := _LC_OFFLOAD.search(line):
        return {"engine": "llamacpp", "offloaded_layers": int(m[1]), "total_layers": int(m[2])}
    if m := _LC_CTX.search(line):
        return {"engine": "llamacpp", "context": int(m[1])}
    if m := _LC_FA.search(line):
        return {"engine": "llamacpp", "attention_backend": f"flash_attn={m[1]}"}
    if m := _LC_KV.search(line):
        return {"engine": "llamacpp", "kv_cache_dtype": _kv_pair(m[1] or m[3], m[2] or m[4])}
    if m := _LC_FTYPE.search(line):
        return {"engine": "llamacpp"} | _ftype(m[1])
    if m := _LC_MODEL.search(line):
        return {"engine": "llamacpp", "model": m[1]}
    if m := _LC_DRAFT.search(line):
        return {"engine": "llamacpp", "spec_method": SpecMethod.DRAFT}
    if (m := _LC_BUILD.search(line)) and int(m[1]) > 0:  # "build: 0 (unknown)": a local build, no number
        return {"engine": "llamacpp", "version": f"b{m[1]}"}
    if m := _LC_LOAD.search(line):
        return {"engine": "llamacpp", "model": m[1]}
    return None


# ---------------------------------------------------------------- one line


def parse_line(line: str) -> tuple[str | None, dict]:
    """(start-up line kind or None, the settings this line states)."""
    if "ServerArgs(" in line:
        return "sglang_args", _sglang_args(line)
    if "non-default args:" in line:
        return "vllm_args", _vllm_nondefault(line)
    if "args: Namespace(" in line:
        return "vllm_args", _vllm_args(pyrepr.call_args(line, "Namespace") or {})
    if " with config: " in line and (m := _VLLM_CONFIG.search(line)):
        return "vllm_config", _vllm_config(line, m)
    if m := _VLLM_VERSION.search(line):
        return "vllm_version", {"engine": "vllm", "version": m[1]}
    if m := _TRTLLM_VERSION.search(line):
        return "trtllm_version", {"engine": "trtllm", "version": m[1]}
    if m := _SGLANG_DEFAULT_ATTN.search(line):
        return None, {"attention_backend": m[1]}
    if "] Using " in line and (m := _VLLM_ATTN.search(line)):
        return None, {"attention_backend": m[1]}
    if ("Load weight end" in line or "KV cache dtype" in line or "Capture cuda graph" in line) and (
            u := _sglang_runtime(line)):
        return None, u
    if m := _LC_DEVICES.search(line):
        return "llamacpp_devices", {"engine": "llamacpp", "gpu_count": int(m[1]), "gpus": ()}
    if any(g in line for g in _LC_GATE):
        return ("llamacpp_model" if "loaded meta data" in line else None), _llamacpp(line) or {}
    return None, {}


# cheap substring tests before any llama.cpp regex: most lines of a long log are none of these
_LC_GATE = ("offloaded", "n_ctx", "flash_attn", "type_k", "MiB, V (", "file type", "ftype", "meta data",
            "draft model", "build", "version", "loading model")
# a text every line parse_line takes something from holds (each of its tests and regexes needs
# one), for a filter that hands over only such lines (logsettings' C filter); " devices" and
# "Device " also open and fill llama.cpp's device list, whose next lines count too (DEVICE_LIST)
PARSED_TEXTS = ("ServerArgs(", "non-default args:", "args: Namespace(", " with config: ", "vLLM API server version",
                "TensorRT-LLM version: ", "Attention backend not ", "] Using ", "Load weight end", "KV cache dtype",
                "Capture cuda graph", " devices", "Device ", *_LC_GATE)
DEVICE_LIST = (" devices", "Device ")
# a line holding one of these is a statistics or request line, never a start-up line
SKIPPED = ("Decode batch", "Prefill batch", "throughput", "HTTP/1.1")
_SKIP1, _SKIP2, _SKIP3, _SKIP4 = SKIPPED


# ---------------------------------------------------------------- the stream


class _Run:
    """The segment being read: values, the line that stated each, notes."""

    def __init__(self, first: int):
        self.first = self.last = first
        self.values: dict = {}
        self.where: dict[str, int] = {}
        self.kinds: set[str] = set()
        self.notes: dict[str, Note] = {}
        self.devices_open = False  # after llama.cpp's "found N CUDA devices", Device lines follow

    def conflicts(self, updates: dict) -> bool:
        return any(k != "gpus" and k in self.values and self.values[k] != v for k, v in updates.items())

    def apply(self, n: int, updates: dict) -> None:
        for k, v in updates.items():
            self.values[k] = v
            self.where[k] = n

    def note(self, rule: str, n: int, line: str) -> None:
        old = self.notes.get(rule)
        self.notes[rule] = replace(old, count=old.count + 1) if old else Note(rule, n, line)

    def segment(self) -> SettingsSegment:
        return SettingsSegment(self.first, self.last, Settings(**self.values), dict(self.where),
                               tuple(sorted(self.notes.values(), key=lambda x: x.line)))


def read_settings(lines: Iterable[str]) -> list[SettingsSegment]:
    """Every run's settings in a log, in order; a log without start-up lines gives []."""
    return read_numbered(enumerate(lines, 1))


def read_numbered(lines: Iterable[tuple[int, str]]) -> list[SettingsSegment]:
    """read_settings of (line number, line) pairs: the lines it skips may be left out."""
    from decodescope.serverstats.findings import line_rules
    rules = line_rules()
    runs: list[_Run] = []
    run = None
    for n, raw in lines:
        # most lines of a long log are statistics or requests, never start-up lines: four substring
        # tests, written out (a third of the time of any() over SKIPPED)
        if _SKIP1 in raw or _SKIP2 in raw or _SKIP3 in raw or _SKIP4 in raw:
            continue
        line = raw[:MAX_LINE].rstrip("\r\n")
        kind, updates = _device_line(run, line) or parse_line(line)
        hits: dict[str, re.Match] = {}  # one per rule: a line may match several of its patterns
        for rid, gate, rx in rules:
            if rid not in hits and gate in line and (m := rx.search(line)):
                hits[rid] = m
        if not (updates or hits):
            continue
        if run is None or (kind and kind in run.kinds and run.conflicts(updates)):
            run = _Run(n)
            runs.append(run)
        if kind:
            run.kinds.add(kind)
            run.devices_open = kind == "llamacpp_devices"
        run.apply(n, updates)
        for rid, m in hits.items():  # a long line (ServerArgs) is quoted by its matching part only
            run.note(rid, n, line.strip() if len(line) <= 500 else m[0][:500])
        run.last = n
    return [r.segment() for r in runs]


def _device_line(run: "_Run | None", line: str) -> tuple[None, dict] | None:
    """llama.cpp's `  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6` lines."""
    if run is None or not run.devices_open:
        return None
    m = _LC_DEVICE.search(line)
    if not m:
        run.devices_open = False
        return None
    return None, {"gpus": (*(run.values.get("gpus") or ()), m[1])}
