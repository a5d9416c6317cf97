"""The operators of one forward pass on one GPU: bytes moved and FLOPs done, then time
by a roofline per operator — max(bytes / bandwidth, FLOPs / peak) — plus the fixed
costs that do not scale with bytes (kernel floors, allreduce latency)."""

from __future__ import annotations

from collections import Counter
from functools import lru_cache
from math import comb
from typing import TYPE_CHECKING, NamedTuple

from decodescope.arch import MLA, Arch, Attention, Layer, MoE, PooledKV, StateMixer, Tensor
from decodescope.model.actquant import quant_kernels
from decodescope.model.formats import WeightFormat
from decodescope.model.kloop import k_loop_excess_s

if TYPE_CHECKING:  # deployment checks use unique_layers: import it for annotations only
    from decodescope.model.deployment import Deployment

ACT_BYTES = 2  # bf16 activations on the wire


class Rates(NamedTuple):
    """The hardware figures one estimate uses: datasheet ones for the ceiling,
    achievable ones (engine profile or calibration) for the expected value. Internal, never
    serialised: a NamedTuple is as immutable and costs a fraction of a dataclass to define."""
    bw: float  # bytes/s of a bf16 weight stream
    bw_by_format: dict  # format name -> bytes/s of its kernels
    flops: dict  # dtype -> FLOP/s
    kernel_floor_s: float  # fixed time per kernel
    allreduce_alpha_s: float
    link_bw: float  # bytes/s per direction between two GPUs of the group
    link_peers: int = 1  # GPU.link_peers on its own link (a full mesh), else 1
    # the engine's decode attention reads the KV cache once per query head (expected rates
    # of a Deployment.kv_per_query_head; the ceiling takes a kernel that reads it once)
    kv_per_query_head: bool = False
    # (tokens, slowdown, per-token slowdown): above `tokens` tokens per pass the engine runs a
    # MoE layer's expert matmuls through a batched kernel (batched_moe_ops); () for none
    moe_batched: tuple = ()
    # seconds per 128-deep K block of a dense FP8 GEMM that walks K in one workgroup per output
    # tile (model/kloop.py); 0: the engine's kernels split K, and the roofline stands
    fp8_k_block_s: float = 0.0
    # below moe_batched's tokens the MoE mat-vec kernel reads an expert once per (token, expert)
    # pair (expected rates of EngineProfile.moe_matvec_per_pair; the ceiling shares the reads)
    moe_matvec_per_pair: bool = False
    # share of its format's bandwidth the MoE mat-vec kernel reaches on routed experts (expected
    # rates of EngineProfile.moe_matvec_efficiency; 1 for the ceiling)
    moe_matvec_eff: float = 1.0


class Op(NamedTuple):
    """Immutable like a frozen dataclass; a tuple because thousands are built per run and a
    frozen dataclass's __init__ (one object.__setattr__ per field) is several times slower."""
    component: str  # weights | kv_cache | state | allreduce | kernels
    name: str
    bytes: float
    flops: float
    time_s: float
    bound: str  # memory | compute | comm | fixed


def expected_experts(num_experts: int, top_k: int, tokens: int) -> float:
    """Distinct experts that `tokens` tokens touch, each picking top_k of E uniformly:
    E * (1 - (1 - k/E)^tokens). Not all E, and not top_k once tokens > 1."""
    return num_experts * (1 - (1 - top_k / num_experts) ** tokens)


def busiest_rank_experts(num_experts: int, top_k: int, tokens: int, ep: int) -> float:
    """Expected distinct experts on the busiest of `ep` ranks (E/ep experts each): the
    rank that reads the most sets the MoE layer's time. Each expert is touched with
    q = 1 - (1 - k/E)^tokens; per rank that is Binomial(E/ep, q) and E[max of ep] =
    sum over x of 1 - F(x)^ep."""
    if ep == 1:
        return expected_experts(num_experts, top_k, tokens)
    n = num_experts // ep
    q = expected_experts(num_experts, top_k, tokens) / num_experts
    if q >= 1.0:
        return float(n)
    pmf = [comb(n, x) * q ** x * (1 - q) ** (n - x) for x in range(n + 1)]
    cdf, total = 0.0, 0.0
    for x in range(n):
        cdf += pmf[x]
        total += 1 - cdf ** ep
    return total


def _roofline(component, name, nbytes, flops, bw, peak) -> Op:
    t_mem, t_comp = nbytes / bw, flops / peak if flops else 0.0
    if t_comp > t_mem:
        return Op(component, name, nbytes, flops, t_comp, "compute")
    return Op(component, name, nbytes, flops, t_mem, "memory")


def tensor_params_gpu(t: Tensor, tp: int, ep: int, touched_experts: float | None = None) -> float:
    """Parameters of `t` one GPU of a TP `tp` / EP `ep` group holds (touched_experts=None)
    or reads in one pass (touched_experts = the routed experts read on this GPU's rank)."""
    per = t.params // t.experts
    if t.experts > 1:  # touched_experts: already per rank
        experts = t.experts / ep if touched_experts is None else touched_experts
        return experts * per / (tp // ep if t.shard in ("col", "row") else 1)  # each expert split over tp/ep
    if t.shard in ("col", "row", "vocab"):
        return per / tp
    if t.shard == "kv":
        return per / t.kv_heads * max(1, t.kv_heads // tp)
    return per  # rep


def weight_ops(layer_tensors, moe: MoE | None, fmt: WeightFormat, d: Deployment, tokens: int,
               r: Rates, mtp: bool = False, routed: int | None = None) -> list[Op]:
    """One op per weight tensor; tokens = batch * tokens per request in this pass, of
    which `routed` (default: all) are distinct tokens the router spreads over experts."""
    peak, flops_by_dtype = r.flops["bf16"], r.flops
    tensors = tuple(layer_tensors)
    work = _weight_work(tensors, moe, fmt, d.tp, d.ep, tokens, tokens if routed is None else routed, mtp,
                        per_pair_reads(moe, tokens, r))
    return [_roofline("weights", name, nbytes, flops, stream_bw(t, kernel, r),
                      flops_by_dtype[key] if key is not None else peak)
            for t, (name, nbytes, flops, kernel, key) in zip(tensors, work)]


def stream_bw(t: Tensor, kernel: str | None, r: Rates) -> float:
    """Bytes/s at which tensor `t` is read: its format's kernels' rate (bf16's for 16-bit
    tensors), a routed expert's at the MoE mat-vec kernel's share of it."""
    bw = r.bw_by_format.get(kernel, r.bw) if kernel is not None else r.bw
    return bw * r.moe_matvec_eff if t.experts > 1 else bw


# The same layers at the same split and tokens come back for the ceiling and the expected
# estimate of each lever (every other GPU among them): their bytes and FLOPs don't depend
# on the rates, and the function is pure in its hashable arguments, so they are kept.
@lru_cache(maxsize=1024)
def _weight_work(tensors: tuple[Tensor, ...], moe: MoE | None, fmt: WeightFormat, tp: int, ep: int, tokens: int,
                 routed: int, mtp: bool, per_pair: bool = False) -> tuple[tuple[str, float, float, str | None, str | None], ...]:
    """(name, bytes, FLOPs, kernel, compute dtype) per weight tensor; kernel and compute
    dtype are None for tensors read and multiplied in 16 bits (the bf16 rates). per_pair: an
    expert is read once per (token, expert) pair, tokens x top_k reads spread over the ep ranks,
    not once per distinct expert touched."""
    touched = None
    if moe:
        touched = (tokens * moe.num_experts_per_tok / ep if per_pair
                   else busiest_rank_experts(moe.num_experts, moe.num_experts_per_tok, routed, ep))
    out = []
    for t in tensors:
        tf = fmt.tensor_format(t, mtp)  # bits, kernel and compute dtype of this tensor
        params = tensor_params_gpu(t, tp, ep, touched)
        nbytes = params * tf.bits / 8
        if not t.linear:
            out.append((t.name, nbytes, 0.0, None, None))
            continue
        # each token runs through top_k experts, split over ep ranks and moe_tp slices
        per_token = (t.params // t.experts * moe.num_experts_per_tok / ep / (tp // ep)
                     if t.experts > 1 else params)
        quantised = tf.bits < 16
        out.append((t.name, nbytes, 2 * per_token * tokens, tf.kernel if quantised else None,
                    _compute_key(tf) if quantised else None))
    return tuple(out)


def _compute_key(tf) -> str:
    """The Rates.flops key a tensor's matmul runs at: MXFP4 has its own ("mxfp4"), as
    GPUs without FP4 tensor cores run its MoE kernels at the BF16 rate."""
    return "mxfp4" if tf.compute == "fp4" and tf.kernel.startswith("mxfp4") else tf.compute


def per_pair_reads(moe: MoE | None, tokens: int, r: Rates) -> bool:
    """Whether this pass's experts run through a mat-vec kernel that reads an expert once per
    (token, expert) pair (Rates.moe_matvec_per_pair, up to moe_batched's tokens per pass)."""
    return bool(moe and r.moe_matvec_per_pair and r.moe_batched and tokens <= r.moe_batched[0])


def batched_moe_ops(layer_tensors, moe: MoE | None, fmt: WeightFormat, d: Deployment, tokens: int, routed: int,
                    r: Rates, mtp: bool = False) -> list[Op]:
    """The extra time of a MoE layer's expert matmuls where the engine leaves its mat-vec
    kernel: llama.cpp's CUDA / HIP and Vulkan backends multiply the routed experts with a
    mat-vec kernel for one token per pass only and with a tiled one from two on, Metal up to
    31 tokens (builds of late 2025; engines.toml serving.llamacpp quotes the source); each
    backend's tiled kernel may have its own cost (r.moe_batched, from EngineProfile.on(backend)). The experts
    read stay the routed ones (expected_experts, in weight_ops); the tiled kernel adds
    (slowdown + per_token x tokens each touched expert multiplies) x the mat-vec kernel's time
    for ONE token's experts (r.moe_batched): a cost per call and per column of the tile, not
    per expert read, so it scales with the GPU's bandwidth but not with the experts touched."""
    if not r.moe_batched or moe is None or tokens <= r.moe_batched[0]:
        return []
    _, slowdown, per_token = r.moe_batched
    tensors = tuple(layer_tensors)
    work = _weight_work(tensors, moe, fmt, d.tp, d.ep, tokens, routed, mtp)  # one row per tensor
    touched_s = sum(nbytes / stream_bw(t, kernel, r) for t, (_, nbytes, _, kernel, _) in zip(tensors, work)
                    if t.experts > 1)
    touched = busiest_rank_experts(moe.num_experts, moe.num_experts_per_tok, routed, d.ep)
    one_token = moe.num_experts_per_tok / d.ep  # the experts one token reads on a rank
    per_expert = tokens * one_token / touched  # tokens each touched expert multiplies
    # the same bytes read slower: weight-stream time, so the weights row shows the lower effective GB/s
    return [Op("weights", "batched MoE kernel", 0.0, 0.0,
               touched_s * one_token / touched * (slowdown + per_token * per_expert), "memory")]


def attention_op(mixer, d: Deployment, batch: int, tokens_per_req: int, r: Rates) -> Op:
    """Read each request's KV cache once per pass; every query token attends to it."""
    window = getattr(mixer, "sliding_window", None)
    context = min(d.context + tokens_per_req, window) if window else d.context + tokens_per_req
    if isinstance(mixer, MLA):
        kv_heads = 1  # one latent per token, replicated on every TP rank
    else:
        kv_heads = max(1, mixer.num_key_value_heads // d.tp)
    nbytes = batch * mixer.kv_read_bytes(context, kv_heads, d.kv_bytes) * kv_reads_per_head(mixer, d, kv_heads, r)
    flops = batch * tokens_per_req * mixer.attention_flops_per_token(mixer.num_attention_heads / d.tp, context)
    return _roofline("kv_cache", "attention", nbytes, flops, r.bw, r.flops["bf16"])


def kv_reads_per_head(mixer, d: Deployment, kv_heads: int, r: Rates) -> float:
    """Times a decode pass streams each of a GPU's `kv_heads` KV caches: once, or once per
    query head of its group (the GPU's query heads / its KV heads) where the kernel gives
    every query head its own thread block (Rates.kv_per_query_head; only grouped-query
    attention differs). The expected estimate costs those reads at memory bandwidth (their
    reuse in L2 is not modelled); the ceiling reads once, as a kernel that reuses them would."""
    if not r.kv_per_query_head or not isinstance(mixer, Attention):
        return 1.0
    return max(1.0, mixer.num_attention_heads / d.tp / kv_heads)


def state_op(mixer, d: Deployment, batch: int, tokens_per_req: int, r: Rates) -> Op:
    """Recurrent state of a StateMixer: read once, written after each token of the pass (a verify pass
    keeps every intermediate state so that rejected draft tokens can be rolled back).
    Engines that keep those in scratch copy the accepted one into the cache afterwards:
    one more read and write of the state per verify pass."""
    per_req = mixer.state_bytes(d.tp)
    commit = 2 if tokens_per_req > 1 and d.engine.state_commit_after_verify else 0
    nbytes = batch * per_req * (1 + tokens_per_req + commit)
    flops = 4 * batch * tokens_per_req * per_req / mixer.state_dtype_bytes  # ~4 FLOP per state element
    return _roofline("state", "recurrent state", nbytes, flops, r.bw, r.flops["bf16"])


def link_time_s(r: Rates, wire_bytes: float, exchanges: int = 1) -> float:
    """Seconds of `exchanges` latency-bound transfers between GPUs carrying `wire_bytes`
    over one GPU's link in all: exchanges x alpha + bytes / link bandwidth."""
    return exchanges * r.allreduce_alpha_s + wire_bytes / r.link_bw


def mesh_links(n: int, r: Rates) -> int:
    """Links a GPU's share of a collective among n GPUs spreads over: one per peer where the
    GPUs form a full mesh (RCCL runs one ring per link), else its one link."""
    return max(1, min(n - 1, r.link_peers))


def allreduce_op(name: str, msg_bytes: float, n: int, r: Rates) -> Op:
    """Ring allreduce: alpha + 2(n-1)/n * bytes / link bandwidth (over mesh_links links)."""
    wire = 2 * (n - 1) / n * msg_bytes / mesh_links(n, r)
    return Op("allreduce", name, msg_bytes, 0.0, link_time_s(r, wire), "comm")


_UNIQUE: dict[int, tuple] = {}


def unique_layers(layers: tuple[Layer, ...]) -> tuple[tuple[Layer, int], ...]:
    """Identical layers (most of a model) are timed once and counted. Cached by the
    tuple's identity: hashing a layer walks all its tensors, too slow to repeat for
    every lever."""
    hit = _UNIQUE.get(id(layers))
    if hit is None or hit[0] is not layers:
        hit = _UNIQUE[id(layers)] = (layers, tuple(Counter(layers).items()))
    return hit[1]


def repeated_ops(layers: tuple[Layer, ...], fmt: WeightFormat, d: Deployment, batch: int, tokens_per_req: int,
                 r: Rates) -> list[Op]:
    """layer_ops of every layer, identical layers timed once and scaled by their count."""
    out = []
    for layer, n in unique_layers(layers):
        out += [Op(component, name, nbytes * n, flops * n, time_s * n, bound)
                for component, name, nbytes, flops, time_s, bound in layer_ops(layer, fmt, d, batch, tokens_per_req, r)]
    return out


def layer_ops(layer: Layer, fmt: WeightFormat, d: Deployment, batch: int, tokens_per_req: int,
              r: Rates, mtp: bool = False) -> list[Op]:
    if d.split_rows:  # llama.cpp's row split: its own exchanges, attention on the main GPU
        from decodescope.model.rowsplit import row_split_layer_ops
        return row_split_layer_ops(layer, fmt, d, batch, tokens_per_req, r)
    tokens = batch * tokens_per_req
    moe = layer.mlp if isinstance(layer.mlp, MoE) else None
    routed = routed_tokens(d, batch, tokens_per_req)
    ops = weight_ops(layer.tensors(), moe, fmt, d, tokens, r, mtp, routed)
    k_loops = k_loop_excess_s(layer.tensors(), [op.time_s for op in ops], fmt, moe, d.tp, r.fp8_k_block_s, mtp)
    ops += [Op("kernels", "fp8 GEMM K loops", 0.0, 0.0, k_loops, "fixed")] if k_loops else []
    quant = quant_kernels(layer, fmt, d, mtp)
    ops += [Op("kernels", "fp8 input quantization", 0.0, 0.0, quant * r.kernel_floor_s, "fixed")] if quant else []
    ops += batched_moe_ops(layer.tensors(), moe, fmt, d, tokens, routed, r, mtp)
    # a Falcon-H1 ParallelHybrid mixer holds attention and Mamba2 side by side: both run
    for m in getattr(layer.mixer, "parts", (layer.mixer,)):
        if isinstance(m, (Attention, MLA, PooledKV)):  # PooledKV: DeepSeek-V4
            ops.append(attention_op(m, d, batch, tokens_per_req, r))
        elif isinstance(m, StateMixer):  # a fixed-size state: GatedDeltaNet, Mamba2, ShortConv, KDA
            ops.append(state_op(m, d, batch, tokens_per_req, r))
    return ops + reduce_and_floor_ops(layer, tokens, d, r)


def reduce_and_floor_ops(layer: Layer, tokens: int, d: Deployment, r: Rates) -> list[Op]:
    """A layer's tensor-parallel allreduces over `tokens` tokens and its kernel floors (a
    decode pass and a context pass alike)."""
    ops = []
    if d.tp > 1:  # one allreduce after the mixer and one after the MLP (row-parallel outputs)
        msg = tokens * layer_hidden(layer) * ACT_BYTES
        ops += [allreduce_op(f"{part} allreduce", msg, d.tp, r)
                for part in ("mixer", "mlp") if getattr(layer, part) is not None]
        # a mixer that reduces more than once (its `reductions`): Falcon-H1's attention and Mamba2
        # each reduce their row-parallel output (vLLM's FalconH1ParallelHybrid sums the two after
        # both); Qwen4-Exp's PLE layers sum the vocab-parallel n-gram table's gathered rows over TP
        ops += [allreduce_op("mixer allreduce", msg, d.tp, r)
                for _ in range(getattr(layer.mixer, "reductions", 1) - 1)]
    ops.append(Op("kernels", "kernel floors", 0.0, 0.0, layer.kernels * r.kernel_floor_s, "fixed"))
    return ops


def routed_tokens(d: Deployment, batch: int, tokens_per_req: int) -> int:
    """Distinct tokens a MoE router sees in one pass: one request's when all requests
    decode the same token (same_tokens), else every token of the batch."""
    return tokens_per_req if d.same_tokens else batch * tokens_per_req


def layer_hidden(layer: Layer) -> int:
    return (layer.mixer or layer.mlp).hidden_size


def lm_head(arch: Arch, d: Deployment, vocab: int | None = None) -> Tensor:
    """The LM head as the engine holds it: vocab-parallel over TP ranks, or whole on each."""
    return _head_tensor(vocab or arch.vocab_size, arch.hidden_size, d.engine.lm_head_shard)


@lru_cache(maxsize=256)
def _head_tensor(vocab: int, hidden: int, shard: str) -> Tensor:
    """One Tensor per shape: every estimate of every lever asks for it."""
    return Tensor("lm_head", (vocab, hidden), shard)


def embedding_ops(arch: Arch, d: Deployment, tokens: int, r: Rates) -> list[Op]:
    """A vocab-parallel embedding looks each token up on the rank that holds its row and
    allreduces the [tokens, hidden] result: one allreduce per forward pass."""
    if d.tp == 1 or d.engine.lm_head_shard != "vocab" or d.split_rows:  # a row split reduces nothing
        return []
    return [allreduce_op("embedding allreduce", tokens * arch.hidden_size * ACT_BYTES, d.tp, r)]


def head_ops(arch: Arch, fmt: WeightFormat, d: Deployment, batch: int, tokens_per_req: int,
             r: Rates, vocab: int | None = None) -> list[Op]:
    """Final norm + LM head over every token of the pass (+ gathering the vocab-parallel logits)."""
    tokens = batch * tokens_per_req
    head = lm_head(arch, d, vocab)
    ops = weight_ops([arch.final_norm, head], None, fmt, d, tokens, r)
    if d.tp > 1 and head.shard == "vocab":
        msg = tokens * head.shape[0] * ACT_BYTES  # the gathered logits
        ops.append(Op("allreduce", "logits gather", msg, 0.0, link_time_s(r, (d.tp - 1) / d.tp * msg / mesh_links(d.tp, r)), "comm"))
    ops.append(Op("kernels", "kernel floors", 0.0, 0.0, 4 * r.kernel_floor_s, "fixed"))  # norm, head, sample
    return ops


def pipeline_ops(arch: Arch, d: Deployment, batch: int, tokens_per_req: int, r: Rates) -> list[Op]:
    """Stages run one after another at decode: (pp-1) hand-offs of the hidden states."""
    msg = batch * tokens_per_req * arch.hidden_size * ACT_BYTES
    return [Op("allreduce", "pipeline send", msg, 0.0, link_time_s(r, msg), "comm")
            for _ in range(d.pp - 1)]
