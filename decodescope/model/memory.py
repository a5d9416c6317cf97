"""Does the deployment fit in GPU memory? Weights held (all experts, not only the
touched ones), KV cache for batch x context, recurrent state slots."""

from dataclasses import dataclass, replace

from decodescope.arch import MLA, Arch, Attention, PooledKV, StateMixer
from decodescope.errors import DecodescopeError
from decodescope.hardware import get_interconnect
from decodescope.model.deployment import Deployment, check, engine_format
from decodescope.model.formats import parse_format
from decodescope.model.ops import lm_head, tensor_params_gpu, unique_layers


@dataclass(frozen=True)
class MemoryFit:
    """Bytes per GPU against the usable memory, for the largest pipeline stage."""
    weights_bytes: float  # per GPU, the largest pipeline stage, MTP / draft weights included
    kv_cache_bytes: float  # per GPU, batch x (context + verify tokens)
    state_bytes: float  # per GPU, recurrent-state slots (one per verify token + 1 under speculation)
    total_bytes: float
    usable_bytes: float  # the engine's memory_fraction of the device, less its memory_reserve_gb
    capacity_bytes: float
    fits: bool
    max_batch: int  # requests of this context that fit beside the weights
    short_of: str = ""  # what does not fit: "weights", "kv" (one request's cache), "batch" (all requests'); "" fits

    def to_dict(self) -> dict:
        return dict(self.__dict__)


_STAGES: dict[tuple[int, int], tuple] = {}


def stage_layers(arch: Arch, d: Deployment) -> tuple[tuple, ...]:
    """Layers split into pp contiguous stages; cached by identity so that each stage
    stays one tuple (unique_layers caches by identity)."""
    layers, key = arch.layers, (id(arch.layers), d.pp)
    hit = _STAGES.get(key)
    if hit is None or hit[0] is not layers:
        n = len(layers)
        bounds = [round(i * n / d.pp) for i in range(d.pp + 1)]
        hit = _STAGES[key] = (layers, tuple(layers[bounds[i]:bounds[i + 1]] for i in range(d.pp)))
    return hit[1]


def _bytes_held(tensors, d: Deployment, mtp=False) -> float:
    return sum(tensor_params_gpu(t, d.tp, d.ep) * d.weights.tensor_bits(t, mtp) / 8 for t in tensors)


def _layers_held(layers, d: Deployment) -> float:
    # a layer that reuses another's weights holds none of its own (the one it reuses is in this stage: a
    # split that puts them apart would need a copy, which is not counted)
    return sum(n * _bytes_held(layer.tensors() + list(layer.idle), d) for layer, n in unique_layers(layers)
               if not layer.reuses)


def weights_held_per_stage(arch: Arch, d: Deployment) -> list[float]:
    """Weight bytes each pipeline stage holds per GPU. The embedding table is held where
    the engine keeps it on the GPU and sharded as its LM head is; a tied head kept
    apart from a host-side embedding is a GPU copy of the table."""
    e, head = d.engine, lm_head(arch, d)
    stages = [_layers_held(s, d) for s in stage_layers(arch, d)]
    if e.embedding_on_gpu:
        stages[0] += _bytes_held([replace(t, shard=head.shard) for t in (arch.embedding, *arch.input_tables)], d)
    tail = [arch.final_norm] + ([] if arch.tie_word_embeddings and e.embedding_on_gpu else [head])
    stages[-1] += _bytes_held(tail, d)
    if d.spec.method == "mtp":
        stages[-1] += sum(_bytes_held(m.tensors(), d, mtp=True) for m in arch.mtp)
    if d.draft is not None:
        stages[-1] += _layers_held(d.draft.layers, d) + _bytes_held([d.draft.embedding, lm_head(d.draft, d)], d)
    return stages


def per_request_cache(arch: Arch, d: Deployment, layers) -> tuple[float, float]:
    """(KV bytes, state bytes) one request holds on one GPU for these layers."""
    tokens = d.context + d.spec.tokens_per_verify
    slots = 1 + (d.spec.tokens_per_verify if d.spec.k else 0)
    kv = state = 0.0
    for layer, n in unique_layers(layers):
        # a Falcon-H1 ParallelHybrid mixer holds attention and Mamba2 side by side: both cache
        for m in getattr(layer.mixer, "parts", (layer.mixer,)):
            if isinstance(m, Attention) and not m.kv_shared:
                ctx = min(tokens, m.sliding_window) if m.sliding_window else tokens
                kv += n * ctx * m.kv_bytes_per_token(max(1, m.num_key_value_heads // d.tp), d.kv_bytes)
            elif isinstance(m, MLA):
                kv += n * tokens * m.kv_bytes_per_token(1, d.kv_bytes)
            elif isinstance(m, PooledKV):  # DeepSeek-V4: a raw window plus pooled rows
                kv += n * m.kv_cache_bytes(tokens, d.kv_bytes, d.tp)
            elif isinstance(m, StateMixer):  # a fixed-size state: GatedDeltaNet, Mamba2, ShortConv, KDA
                state += n * slots * m.state_bytes(d.tp)
    return kv, state


def memory_need(arch: Arch, d: Deployment) -> tuple[list[float], list[tuple[float, float]]]:
    """(weight bytes held, (KV, state) bytes per request) per stage per GPU: no GPU figure
    enters, so deployments that differ only in GPU and link share them."""
    return weights_held_per_stage(arch, d), [per_request_cache(arch, d, s) for s in stage_layers(arch, d)]


def memory_fit(arch: Arch, d: Deployment, need: tuple | None = None) -> MemoryFit:
    """The memory check of the largest stage; `need`: memory_need of `d` when already known."""
    held, per_req = need or memory_need(arch, d)
    i = max(range(d.pp), key=lambda j: held[j] + d.batch * sum(per_req[j]))
    kv, state = (d.batch * x for x in per_req[i])
    usable = d.gpu.memory_bytes * d.engine.usable_fraction(d.tp) - d.engine.memory_reserve_gb * 1e9
    room = usable - held[i]
    one = sum(per_req[i])
    max_batch = int(room // one) if one > 0 and room > 0 else (0 if room <= 0 else 1 << 20)
    total = held[i] + kv + state
    fits = total <= usable
    short_of = "" if fits else "weights" if room <= 0 else "kv" if max_batch == 0 else "batch"
    return MemoryFit(held[i], kv, state, total, usable, d.gpu.memory_bytes, fits, max_batch, short_of)


def fit_options(arch: Arch, d: Deployment, m: MemoryFit) -> tuple[str, ...]:
    """Flag changes that make a deployment that does not fit, fit: fewer requests, a
    shorter context, an FP8 KV cache, smaller weights the engine serves, the fewest
    GPUs; when no single change does, the first pair of weights and GPUs that does."""
    out = [f"--batch {m.max_batch}"] if m.short_of == "batch" else []
    if m.short_of == "kv" and (ctx := _max_context(arch, d, m)):
        out.append(f"--context {ctx}")
    kv = [("--kv fp8", {"kv_dtype": "fp8"})] if m.short_of != "weights" and d.kv_dtype != "fp8" else []
    formats = [(f"--weights {name}", {"weights": f}) for name, f in _smaller_formats(arch, d)]
    split = "tp" if "tp" in d.engine.splits else "pp"
    link = d.link if d.gpus > 1 else get_interconnect(d.gpu.link)
    splits = [(f"--{split} {getattr(d, split) * n}", {split: getattr(d, split) * n, "link": link})
              for n in (2, 4, 8, 16)]
    singles = [flag for flag, ch in kv + formats if _fits(arch, replace(d, **ch))]
    singles += [flag for flag, ch in splits if _fits(arch, replace(d, **ch))][:1]  # the fewest GPUs
    if not singles:
        pairs = ((f"{f1} {f2}", {**c1, **c2}) for f2, c2 in splits for f1, c1 in formats)
        singles = [next((flag for flag, ch in pairs if _fits(arch, replace(d, **ch))), None)] if formats else []
    return tuple(out + [x for x in singles if x])


def _smaller_formats(arch: Arch, d: Deployment):
    for name in d.engine.formats:
        f = engine_format(parse_format(name, arch), d.engine)
        if f.bits < d.weights.bits and (not name.startswith("nvfp4") or d.gpu.flops.get("fp4")):
            yield name, f


def _fits(arch: Arch, d: Deployment) -> bool:
    try:
        check(arch, d)
    except DecodescopeError:
        return False
    return memory_fit(arch, d).fits


def _max_context(arch: Arch, d: Deployment, m: MemoryFit) -> int:
    """The longest context (a multiple of 1024) at which one request fits, 0 if none."""
    per_token = (m.kv_cache_bytes + m.state_bytes) / d.batch / (d.context + d.spec.tokens_per_verify)
    n = int((m.usable_bytes - m.weights_bytes) / per_token) // 1024 * 1024 if per_token else 0
    while n >= 1024 and not _fits(arch, replace(d, batch=1, context=n)):
        n -= 1024
    return max(n, 0) if n >= 1024 else 0
