"""`decodescope bench`: a real decode loop of a config with random weights (transformers
`from_config`, nothing downloaded): prefill `context` tokens, then time `steps` decode
steps one by one — eager on the CPU, a static cache replayed as a CUDA graph on CUDA —
next to the model's ceiling and expected for the same device."""

import statistics
import warnings
from dataclasses import dataclass, replace
from enum import StrEnum

from decodescope.arch import RawConfig, build_arch
from decodescope.errors import DecodescopeError
from decodescope.hardware.timing import Clock, capture_graph, import_torch, pick_device

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
WARMUP = 3  # untimed decode steps first (allocator, caches, clocks)
HEADROOM = 0.9  # of the free memory a run may plan to use: activations and the allocator need the rest
# the model's profile closest to bench's loop (one model, CUDA graphs, no scheduler). Its host time
# per pass (engines.toml, fitted to gpt-fast's generate.py runs), stays in "expected" on
# the CPU, where Python runs between the ops; a CUDA-graph loop queues the next step without
# waiting, so there its host work hides behind the GPU and counts 0 ms (the note says so)
ENGINE = "gpt-fast"
EAGER_GPU_ENGINE = "transformers"
CAPTURE_WARMUP = 3  # static decode steps run on a side stream before the graph is captured
TRACE_STEPS = 3


class Mode(StrEnum):
    """How bench's loop ran its decode steps."""
    EAGER = "eager"  # the CPU: a dynamic KV cache, every op launched from Python
    GRAPH = "cuda-graph"  # a static KV cache, one step captured as a CUDA graph and replayed
    COMPILED_GRAPH = "compiled-cuda-graph"  # the same, the step torch.compile'd before capture
    STATIC_EAGER = "static-eager"  # graph capture failed: the static step launched from Python


@dataclass(frozen=True)
class BenchConfig:
    device: str = "cpu"
    dtype: str = "bf16"
    batch: int = 1
    context: int = 512
    steps: int = 32
    layers: int | None = None  # keep only the first N decoder layers
    compile: bool = False  # CUDA: torch.compile the decode step before capturing it


@dataclass(frozen=True)
class BenchResult:
    model: str
    device: str  # "cpu" or the GPU's database id
    device_name: str
    config: BenchConfig
    layers: int
    mode: Mode
    step_ms: tuple[float, ...]  # each timed decode step, ms
    weight_bytes: int  # read per step: every parameter but the input embedding (unless tied)
    kv_bytes: float  # KV cache read per step, mean over the timed steps
    model_ceiling_tok_s: float | None  # `decodescope model` for the same device, shape and batch
    model_expected_tok_s: float | None
    copy_bw_bytes_s: float | None  # from the calibration file
    notes: tuple[str, ...] = ()

    @property
    def p50(self) -> float:
        return statistics.median(self.step_ms)

    @property
    def p90(self) -> float:
        s = sorted(self.step_ms)
        return s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))]

    @property
    def tok_s(self) -> float:
        """Tokens per second per request at the median step (all requests: x batch)."""
        return 1e3 / self.p50

    @property
    def achieved_bw_bytes_s(self) -> float:
        return (self.weight_bytes + self.kv_bytes) / (self.p50 / 1e3)

    @property
    def achieved_bw_fraction(self) -> float | None:
        return self.achieved_bw_bytes_s / self.copy_bw_bytes_s if self.copy_bw_bytes_s else None

    def to_dict(self) -> dict:
        c = self.config
        return {"model": self.model, "device": self.device, "device_name": self.device_name, "mode": self.mode,
                "dtype": c.dtype, "batch": c.batch, "context": c.context, "steps": c.steps, "layers": self.layers,
                "step_ms": {"p50": self.p50, "p90": self.p90, "all": list(self.step_ms)},
                "tok_s": self.tok_s, "tok_s_total": self.tok_s * c.batch,
                "weight_bytes_per_step": self.weight_bytes, "kv_bytes_per_step": self.kv_bytes,
                "achieved_bw_bytes_s": self.achieved_bw_bytes_s, "achieved_bw_fraction": self.achieved_bw_fraction,
                "copy_bw_bytes_s": self.copy_bw_bytes_s,
                "model_ceiling_tok_s": self.model_ceiling_tok_s, "model_expected_tok_s": self.model_expected_tok_s,
                "notes": list(self.notes)}


def shrink(raw: RawConfig, layers: int | None) -> RawConfig:
    """The config with only its first `layers` decoder layers (per-layer lists cut too)."""
    if layers is None:
        return raw
    data = dict(raw.data)
    n = data.get("num_hidden_layers")
    if not isinstance(n, int) or not 1 <= layers <= n:
        raise DecodescopeError(f"--layers {layers}: the model has {n} layers", f"use 1 <= --layers <= {n}")
    data["num_hidden_layers"] = layers
    for key in ("layer_types", "mlp_only_layers"):
        if isinstance(data.get(key), list) and key == "layer_types":
            data[key] = data[key][:layers]
    return replace(raw, data=data, name=f"{raw.name} ({layers} layers)")


def plan_memory(raw: RawConfig, cfg: BenchConfig, free_bytes: float) -> float:
    """Bytes the run needs (weights + KV cache); refuses with the --layers that would fit."""
    arch = build_arch(raw)
    per = BYTES[cfg.dtype]
    kv_per_layer = _kv_bytes_per_token_layer(raw.data, per) * cfg.batch * (cfg.context + WARMUP + cfg.steps + 1)
    layers = len(arch.layers)
    other = (arch.params_total - arch.params_layers_total) * per
    per_layer = arch.params_layers_total * per / layers + kv_per_layer
    need = other + layers * per_layer
    if need > HEADROOM * free_bytes:
        fit = int((HEADROOM * free_bytes - other) // per_layer)
        hint = (f"add --layers {fit} (of {layers}) to time a shorter stack of the same layers" if fit >= 1 else
                "even one layer does not fit: lower --batch / --context, or use a smaller --dtype")
        raise DecodescopeError(f"{raw.name} needs {need / 1e9:.1f} GB ({cfg.dtype} weights + KV cache for batch "
                               f"{cfg.batch} x {cfg.context + cfg.steps} tokens) but {free_bytes / 1e9:.1f} GB "
                               "is free on the device", hint)
    return need


def _kv_bytes_per_token_layer(data: dict, per: int) -> float:
    heads = data.get("num_attention_heads", 1)
    kv = data.get("num_key_value_heads") or heads
    head_dim = data.get("head_dim") or data["hidden_size"] // heads
    return 2 * kv * head_dim * per  # K and V


@dataclass(frozen=True)
class Loop:
    """A prefilled model ready to decode: `step()` runs one decode step (bench's own loop)."""
    raw: RawConfig  # after --layers
    device_id: str
    device_name: str
    mode: Mode
    step: object  # () -> None
    tok: object  # the last step's next-token ids [batch, 1], updated in place by step()
    clock: object
    model: object
    notes: tuple[str, ...]


def prepare(raw: RawConfig, cfg: BenchConfig, calibration=None) -> Loop:
    """Build the model with random weights and prefill `cfg.context` tokens."""
    torch = import_torch()
    dev = pick_device(torch, cfg.device)
    device_id, name = _device_ids(torch, dev)
    if calibration is not None and calibration.device != device_id:
        raise DecodescopeError(f"{calibration.source} was measured on '{calibration.device}' "
                               f"({calibration.device_name}); this run is on '{device_id}' ({name})",
                               f"calibrate this device: `decodescope calibrate --device {cfg.device} --out FILE`")
    try:
        import transformers
    except ImportError as e:
        raise DecodescopeError(f"bench needs transformers, which is not installed ({e})",
                               "pip install 'transformers>=4.57'") from None
    if cfg.compile and dev.type != "cuda":
        raise DecodescopeError("--compile: the compiled step is captured as a CUDA graph, so it needs --device cuda",
                               "drop --compile on the CPU (its loop runs eagerly)")
    raw = shrink(raw, cfg.layers)
    plan_memory(raw, cfg, _free_bytes(torch, dev))
    model = _build(torch, transformers, raw, cfg, dev)
    if dev.type == "cuda":
        step, tok = static_stepper(torch, transformers, model, cfg, dev)
        mode, step, notes = _graph(torch, step, cfg.compile)
    else:
        (step, tok), mode, notes = eager_stepper(torch, model, cfg, dev), Mode.EAGER, ()
    return Loop(raw, device_id, name, mode, step, tok, Clock(torch, dev), model, notes)


def run(raw: RawConfig, cfg: BenchConfig, calibration=None, trace: str | None = None) -> BenchResult:
    loop = prepare(raw, cfg, calibration)
    raw = loop.raw
    step_ms = time_steps(loop, cfg.steps)
    if trace:
        write_trace(loop, trace)
    weight_bytes = _weight_bytes(loop.model)
    tokens = cache_tokens(cfg, loop.mode)
    kv = _kv_bytes_per_token_layer(raw.data, BYTES[cfg.dtype]) * raw.data["num_hidden_layers"] * cfg.batch * tokens
    ceiling, expected, mnotes = _model_side(raw, cfg, loop.device_id, calibration, loop.mode, round(tokens))
    return BenchResult(raw.name, loop.device_id, loop.device_name, cfg, raw.data["num_hidden_layers"], loop.mode,
                       tuple(step_ms), weight_bytes, kv, ceiling, expected,
                       calibration.copy_bw_bytes_s if calibration else None, (*loop.notes, *mnotes))


def cache_tokens(cfg: BenchConfig, mode: Mode) -> float:
    """KV-cache tokens each timed step's attention reads: the dynamic cache's mean length over
    the timed steps; a static cache is read whole, its empty slots masked."""
    if mode == Mode.EAGER:
        return cfg.context + WARMUP + (cfg.steps + 1) / 2
    return cfg.context + CAPTURE_WARMUP + WARMUP + cfg.steps + TRACE_STEPS


def _free_bytes(torch, dev) -> float:
    if dev.type == "cuda":
        return float(torch.cuda.mem_get_info(dev)[0])
    with open("/proc/meminfo") as f:
        info = dict(line.split(":", 1) for line in f)
    return float(info["MemAvailable"].split()[0]) * 1024


def _build(torch, transformers, raw: RawConfig, cfg: BenchConfig, dev):
    data = {k: v for k, v in raw.data.items() if k not in ("quantization_config", "auto_map")}
    try:
        hf_cfg = transformers.AutoConfig.for_model(**data)
    except (KeyError, ValueError) as e:
        raise DecodescopeError(f"transformers {transformers.__version__} cannot build {raw.name} ({e})",
                               "bench a model type this transformers knows (llama, qwen3, mistral, ...)") from None
    torch.manual_seed(0)
    with torch.device(dev):
        model = transformers.AutoModelForCausalLM.from_config(hf_cfg, dtype=getattr(torch, DTYPES[cfg.dtype]))
    return model.eval()


def _weight_bytes(model) -> int:
    """Bytes of the parameters one step reads: all but the input embedding, of which only
    the batch's rows are read (a tied embedding is the LM head, read in full)."""
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    emb, head = model.get_input_embeddings().weight, model.get_output_embeddings().weight
    return total if emb is head else total - emb.numel() * emb.element_size()


def eager_stepper(torch, model, cfg: BenchConfig, dev):
    """Prefill, then (step, tok): step() runs one eager decode step (dynamic KV cache)."""
    # transformers 5 renames past_key_values to cache; the old name works on 4.57 and 5.x
    warnings.filterwarnings("ignore", message=".*past_key_values.*", category=FutureWarning)
    ids = torch.randint(0, model.config.vocab_size, (cfg.batch, cfg.context), device=dev)
    with torch.inference_mode():
        r = model(ids, use_cache=True)
        tok = r.logits[:, -1:].argmax(-1)
    state = {"past": r.past_key_values}

    def step():
        with torch.inference_mode():
            out = model(tok, past_key_values=state["past"], use_cache=True)
            state["past"] = out.past_key_values
            tok.copy_(out.logits[:, -1:].argmax(-1))

    return step, tok


def time_steps(loop: Loop, steps: int, warmup: int = WARMUP) -> list[float]:
    """ms of each of `steps` decode steps after `warmup` untimed ones; on the CPU a caller may
    call it again to go on decoding (the dynamic cache keeps growing; a GPU's static cache
    holds the steps of one bench run)."""
    clock, marks = loop.clock, []
    clock.sync()  # nothing queued before (prefill, capture) runs inside the first step's marks
    for i in range(warmup + steps):
        a = clock.mark()
        loop.step()
        b = clock.mark()
        if not clock.cuda:
            clock.sync()
        if i >= warmup:
            marks.append((a, b))
    clock.sync()
    return [clock.ms(a, b) for a, b in marks]


def write_trace(loop: Loop, path: str, steps: int = TRACE_STEPS) -> None:
    """A torch.profiler trace of `steps` decode steps, as Chrome trace JSON (gzipped if path ends .gz)."""
    from torch.profiler import ProfilerActivity, profile
    cuda = loop.clock.cuda
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        for _ in range(steps):
            loop.step()
        loop.clock.sync()  # the GPU's kernels of the last step end inside the profiled window
    prof.export_chrome_trace(path)


def static_stepper(torch, transformers, model, cfg: BenchConfig, dev):
    """Prefill into a static KV cache, then (step, tok): step() runs one decode step that
    only writes tensors allocated here (the cache, tok, pos), as CUDA-graph replay needs.
    transformers 4.57 places the new K, V at cache_position; 5.x counts in the cache itself."""
    cache = transformers.StaticCache(config=model.config, max_cache_len=round(cache_tokens(cfg, Mode.GRAPH)))
    ids = torch.randint(0, model.config.vocab_size, (cfg.batch, cfg.context), device=dev)
    with torch.inference_mode():
        r = model(ids, past_key_values=cache, use_cache=True, cache_position=torch.arange(cfg.context, device=dev))
        tok = r.logits[:, -1:].argmax(-1)
    pos = torch.tensor([cfg.context], device=dev)
    # compiled for the decode shape only (the prefill above ran eagerly): the first step compiles
    forward = torch.compile(model, dynamic=False) if cfg.compile else model

    def step():
        with torch.inference_mode():
            out = forward(tok, past_key_values=cache, use_cache=True, cache_position=pos)
            tok.copy_(out.logits[:, -1:].argmax(-1))
            pos.add_(1)

    return step, tok


def _graph(torch, step, compiled: bool):
    """(mode, step, notes): one static decode step captured as a CUDA graph and replayed per
    step; if capture fails, the same static step eagerly (the note says why)."""
    try:
        g = capture_graph(torch, step, warm=CAPTURE_WARMUP)  # a compiled step compiles in the warm-up
        return (Mode.COMPILED_GRAPH if compiled else Mode.GRAPH), g.replay, ()
    except Exception as e:  # noqa: BLE001 - any capture failure falls back to the same step uncaptured
        torch.cuda.synchronize()
        return Mode.STATIC_EAGER, step, (f"CUDA graph capture failed ({type(e).__name__}: {str(e)[:200]}); "
                                         f"timed eagerly{' (compiled)' if compiled else ''}",)


def _device_ids(torch, dev) -> tuple[str, str]:
    from decodescope.hardware.calibrate import _identity
    name, gid, _ = _identity(torch, dev)
    return gid, name


def _model_side(raw: RawConfig, cfg: BenchConfig, device_id: str, calibration, mode: Mode, context: int):
    """(ceiling tok/s, expected tok/s, notes) from `decodescope model` for the same run, the
    cache at the `context` tokens each step reads."""
    from decodescope.hardware.calibration import apply
    from decodescope.model import make_deployment, predict
    arch = build_arch(raw)
    if device_id == "cpu" and calibration is None:
        return None, None, ("model ceiling / expected: the CPU needs a calibration file (--calibration)",)
    # the model's KV dtypes are 16- and 8-bit: an fp32 cache is counted at 2 bytes per value
    kv = "bf16" if cfg.dtype == "fp32" else cfg.dtype
    # a GPU loop whose graph capture failed launches every kernel from Python, as transformers does
    engine = EAGER_GPU_ENGINE if mode == Mode.STATIC_EAGER else ENGINE
    try:
        d = make_deployment(arch, device_id, weights=cfg.dtype, kv=kv, batch=cfg.batch, context=context,
                            engine=engine)
    except DecodescopeError as e:
        return None, None, (f"model ceiling / expected: {e.what}",)
    notes = ("model: the fp32 KV cache counted at 2 bytes per value (its KV dtypes are 16- and 8-bit)",) \
        if cfg.dtype == "fp32" else ()
    if mode == Mode.STATIC_EAGER:
        notes += (f"model: engine '{engine}' (every kernel launched from Python), as the loop ran",)
    if mode in (Mode.GRAPH, Mode.COMPILED_GRAPH):
        notes += (f"model: host time per pass 0 ms, not {ENGINE}'s {d.engine.host_ms_per_pass} ms: bench queues "
                  "each graph replay without waiting for the last, so the CPU's work hides behind the GPU's",)
        d = replace(d, engine=replace(d.engine, host_ms_per_pass=0.0))
    if calibration is not None:
        d, measured = apply(calibration, d)
        notes += measured
    p = predict(arch, d)
    return p.ceiling.tok_s, p.expected.tok_s, notes
