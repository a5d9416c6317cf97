"""The building blocks of a decoder layer, with the weight tensors each one reads.

Shapes follow the Hugging Face modules (`q_proj: [out, in]`); a block knows nothing of
GPUs: how a tensor splits under tensor parallelism is only *named* here (`shard`) and
applied in decodescope.model."""

from dataclasses import dataclass
from functools import lru_cache
from math import prod

# How tensor parallelism splits a tensor:
#   col  output dim split (q/gate/up projections); row  input dim split (o/down); vocab  vocab-parallel
#   kv   col, but a GPU holds max(1, kv_heads/TP) heads (KV heads replicate once TP > kv_heads)
#   rep  every GPU holds all of it (norms, routers, MLA down-projections, convs)
SHARDS = ("col", "row", "kv", "rep", "vocab")


@dataclass(frozen=True)
class Tensor:
    """One weight tensor of a block: its shape and how tensor parallelism splits it."""
    name: str  # HF module name, e.g. "q_proj"
    shape: tuple[int, ...]  # [out, in] for a linear weight; per expert for routed experts
    shard: str  # one of SHARDS
    linear: bool = True  # a matmul weight a quantisation format converts (False: norms, biases, convs)
    experts: int = 1  # >1: a stack of routed experts, each of `shape`
    kv_heads: int = 0  # for shard "kv": the number of KV heads the out dim holds

    def __post_init__(self):
        # read thousands of times a run (params, and the hash as a cache key); set here, not
        # cached on first use: writing into __dict__ later slows every attribute read in 3.11
        object.__setattr__(self, "_params", prod(self.shape) * self.experts)
        object.__setattr__(self, "_hash", hash((self.name, self.shape, self.shard, self.linear, self.experts,
                                                self.kv_heads)))

    @property
    def params(self) -> int:
        return self._params

    def __hash__(self) -> int:  # equal tensors have equal fields, hence equal hashes
        return self._hash


def linear_tensors(name, out_f, in_f, shard, bias=False, **kw) -> list[Tensor]:
    ts = [Tensor(name, (out_f, in_f), shard, **kw)]
    if bias:  # a bias follows its weight's output split; it stays 16-bit
        bshard = "rep" if shard == "row" else shard
        ts.append(Tensor(name + ".bias", (out_f,), bshard, linear=False,
                         experts=kw.get("experts", 1), kv_heads=kw.get("kv_heads", 0)))
    return ts


def norm_tensor(name, n) -> Tensor:
    return Tensor(name, (n,), "rep", linear=False)


class StateMixer:
    """Base of the mixers that keep a fixed-size state per request instead of a KV cache
    (GatedDeltaNet, Mamba2; ShortConv and Kimi Delta Attention in decodescope.arch.mixers). A
    base class so the model tells them apart without importing that module, whose dataclasses
    cost ~8 ms at start-up for families most runs never build."""
    __slots__ = ()


class PooledKV:
    """Base of the attention mixers whose KV cache is not one row per token and says its own size
    (`kv_cache_bytes(context, dtype_bytes, tp)`, one request's on one GPU): DeepSeek-V4's
    compressed multi-query attention in decodescope.arch.mixers."""
    __slots__ = ()


@dataclass(frozen=True)
class Attention:
    """Softmax attention: MHA / GQA / MQA, optional output gate, q/k norms, window, sinks."""
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    sliding_window: int | None = None  # tokens of KV a query sees (None: all)
    attn_output_gate: bool = False  # Qwen3.5/Next: q_proj also emits a per-head gate
    qk_norm: bool = False
    attention_bias: bool = False  # biases on q, k and v
    sinks: bool = False  # gpt-oss: one learned sink logit per head
    o_bias: bool = False  # a bias on o_proj too (attention_bias in Llama-style configs sets both)
    qk_norm_full: bool = False  # q/k norms over all heads (OLMoE, MiniMax-M2, Cohere), not one head_dim
    v_proj: bool = True  # False: K doubles as V (Gemma 4 global layers, attention_k_eq_v)
    v_head_dim: int = 0  # a V head narrower than the Q/K head (MiMo-V2-Flash: 128 of 192); 0: head_dim
    # K and V come from an earlier layer's cache (Gemma 3n's last num_kv_shared_layers): the layer
    # runs no k/v projections and holds no cache of its own; it still reads that cache
    kv_shared: bool = False
    kernels = 8  # norm, qkv GEMM, q/k-norm+rope, cache write, attention, o GEMM, residual, (gate)

    @property
    def v_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    def tensors(self) -> list[Tensor]:
        h, d = self.hidden_size, self.head_dim
        q_out = self.num_attention_heads * d * (2 if self.attn_output_gate else 1)
        kv_out = self.num_key_value_heads * d
        b, kv = self.attention_bias, self.num_key_value_heads
        ts = [norm_tensor("input_layernorm", h)]
        ts += linear_tensors("q_proj", q_out, h, "col", b)
        if not self.kv_shared:
            ts += linear_tensors("k_proj", kv_out, h, "kv", b, kv_heads=kv)
        if self.v_proj and not self.kv_shared:
            ts += linear_tensors("v_proj", kv * self.v_dim, h, "kv", b, kv_heads=kv)
        ts += linear_tensors("o_proj", h, self.num_attention_heads * self.v_dim, "row", self.o_bias)
        if self.qk_norm and self.qk_norm_full:
            ts += [Tensor("q_norm", (self.num_attention_heads * d,), "col", linear=False),
                   Tensor("k_norm", (kv_out,), "kv", linear=False, kv_heads=kv)]
        elif self.qk_norm:
            ts += [norm_tensor("q_norm", d)] + ([] if self.kv_shared else [norm_tensor("k_norm", d)])
        if self.sinks:
            ts.append(Tensor("sinks", (self.num_attention_heads,), "col", linear=False))
        return ts

    def kv_bytes_per_token(self, kv_heads: int, dtype_bytes: float) -> float:
        # K (kv_heads x head_dim) and V (kv_heads x v_dim)
        return kv_heads * (self.head_dim + self.v_dim) * dtype_bytes

    def kv_read_bytes(self, context: int, kv_heads: int, dtype_bytes: float) -> float:
        """Cache bytes one query token reads over `context` tokens."""
        return context * self.kv_bytes_per_token(kv_heads, dtype_bytes)

    def attention_flops_per_token(self, heads: int, context: int) -> float:
        # QK^T over head_dim and PV over v_dim: 2 FLOP per MAC, x context per head
        return 2 * heads * (self.head_dim + self.v_dim) * context


@dataclass(frozen=True)
class MLA:
    """DeepSeek multi-head latent attention. The cache holds one latent of
    kv_lora_rank + qk_rope_head_dim per token, shared by all heads (so TP replicates it)."""
    hidden_size: int
    num_attention_heads: int
    q_lora_rank: int | None
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    # DeepSeek-V3.2 / GLM-5 sparse attention: a lightning indexer scores every cached token
    # with its own small key cache, and attention reads only the index_topk best ones
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    kernels = 12  # norms, q_a, q_b, kv_a, absorbed bmm x2, rope, cache write, attention, o, residual

    def tensors(self) -> list[Tensor]:
        h, n = self.hidden_size, self.num_attention_heads
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        ts = [norm_tensor("input_layernorm", h)]
        if self.q_lora_rank:
            ts += [Tensor("q_a_proj", (self.q_lora_rank, h), "rep"),
                   norm_tensor("q_a_layernorm", self.q_lora_rank),
                   Tensor("q_b_proj", (n * qk, self.q_lora_rank), "col")]
        else:
            ts.append(Tensor("q_proj", (n * qk, h), "col"))
        ts += [Tensor("kv_a_proj_with_mqa", (self.kv_lora_rank + self.qk_rope_head_dim, h), "rep"),
               norm_tensor("kv_a_layernorm", self.kv_lora_rank),
               Tensor("kv_b_proj", (n * (self.qk_nope_head_dim + self.v_head_dim), self.kv_lora_rank), "col"),
               Tensor("o_proj", (h, n * self.v_head_dim), "row")]
        if self.index_topk:  # indexer: its query from the q latent, one shared key, per-head weights
            ni, di = self.index_n_heads, self.index_head_dim
            ts += [Tensor("indexer.wq_b", (ni * di, self.q_lora_rank or h), "rep"),
                   Tensor("indexer.wk", (di, h), "rep"),
                   Tensor("indexer.k_norm", (2 * di,), "rep", linear=False),  # LayerNorm weight + bias
                   Tensor("indexer.weights_proj", (ni, h), "rep", linear=False)]
        return ts

    @property
    def index_bytes_per_token(self) -> float:
        # fp8 key + one fp32 scale per 128 values (vLLM DeepseekV32IndexerCache: 128 + 4 bytes)
        return self.index_head_dim + 4 * -(-self.index_head_dim // 128) if self.index_topk else 0

    def kv_bytes_per_token(self, kv_heads: int, dtype_bytes: float) -> float:
        return (self.kv_lora_rank + self.qk_rope_head_dim) * dtype_bytes + self.index_bytes_per_token

    def kv_read_bytes(self, context: int, kv_heads: int, dtype_bytes: float) -> float:
        """Cache bytes one query token reads: the indexer's keys over the whole context,
        the latent only for the top-k tokens it selects."""
        attended = min(context, self.index_topk) if self.index_topk else context
        latent = (self.kv_lora_rank + self.qk_rope_head_dim) * dtype_bytes
        return attended * latent + context * self.index_bytes_per_token

    def attention_flops_per_token(self, heads: int, context: int) -> float:
        # absorbed decode: scores over (kv_lora_rank + rope) and values over kv_lora_rank,
        # over the top-k tokens; the indexer scores all context tokens (index heads x head dim)
        attended = min(context, self.index_topk) if self.index_topk else context
        index = 2 * self.index_n_heads * self.index_head_dim * context * heads / self.num_attention_heads
        return 2 * heads * attended * (2 * self.kv_lora_rank + self.qk_rope_head_dim) + index


@dataclass(frozen=True)
class GatedDeltaNet(StateMixer):
    """Qwen3-Next / Qwen3.5 linear attention. Per request it keeps a fixed-size state:
    a recurrent state [v_heads, k_head_dim, v_head_dim] and a conv window."""
    hidden_size: int
    linear_num_key_heads: int
    linear_num_value_heads: int
    linear_key_head_dim: int
    linear_value_head_dim: int
    linear_conv_kernel_dim: int
    state_dtype_bytes: int = 4  # mamba_ssm_dtype, float32 by default
    conv_dtype_bytes: int = 2  # SGLang's SGLANG_MAMBA_CONV_DTYPE default bfloat16
    kernels = 10  # norm, in_proj GEMMs, conv, gating, recurrent update, gated norm, out GEMM, residual

    @property
    def key_dim(self) -> int:
        return self.linear_num_key_heads * self.linear_key_head_dim

    @property
    def value_dim(self) -> int:
        return self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def conv_dim(self) -> int:  # the conv runs over cat(q, k, v)
        return 2 * self.key_dim + self.value_dim

    def tensors(self) -> list[Tensor]:
        h, nv = self.hidden_size, self.linear_num_value_heads
        return [norm_tensor("input_layernorm", h),
                Tensor("in_proj_qkv", (self.conv_dim, h), "col"),
                Tensor("in_proj_z", (self.value_dim, h), "col"),
                Tensor("in_proj_b", (nv, h), "col"),
                Tensor("in_proj_a", (nv, h), "col"),
                Tensor("conv1d", (self.conv_dim, self.linear_conv_kernel_dim), "col", linear=False),
                Tensor("dt_bias", (nv,), "col", linear=False),
                Tensor("A_log", (nv,), "col", linear=False),
                norm_tensor("norm", self.linear_value_head_dim),
                Tensor("out_proj", (h, self.value_dim), "row")]

    def state_bytes(self, tp: int) -> float:
        """Bytes of one request's state on one GPU (heads split by TP)."""
        ssm = self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim
        conv = self.conv_dim * (self.linear_conv_kernel_dim - 1)
        return (ssm * self.state_dtype_bytes + conv * self.conv_dtype_bytes) / tp


@dataclass(frozen=True)
class Mamba2(StateMixer):
    """Nemotron-H Mamba2 mixer; state [heads, head_dim, ssm_state_size] + conv window."""
    hidden_size: int
    mamba_num_heads: int
    mamba_head_dim: int
    n_groups: int
    ssm_state_size: int
    conv_kernel: int
    use_conv_bias: bool = True
    mamba_proj_bias: bool = False
    state_dtype_bytes: int = 4
    conv_dtype_bytes: int = 2
    gated_norm: bool = True  # the gated RMSNorm before out_proj (Falcon-H1's mamba_rms_norm may drop it)
    kernels = 8  # norm, in_proj, conv, ssm update, gated norm, out_proj, residual

    @property
    def intermediate(self) -> int:
        return self.mamba_num_heads * self.mamba_head_dim

    @property
    def conv_dim(self) -> int:
        return self.intermediate + 2 * self.n_groups * self.ssm_state_size

    def tensors(self) -> list[Tensor]:
        h, nh = self.hidden_size, self.mamba_num_heads
        in_out = 2 * self.intermediate + 2 * self.n_groups * self.ssm_state_size + nh  # z, xBC, dt
        ts = [norm_tensor("norm", h)]
        ts += linear_tensors("in_proj", in_out, h, "col", self.mamba_proj_bias)
        ts.append(Tensor("conv1d", (self.conv_dim, self.conv_kernel), "col", linear=False))
        if self.use_conv_bias:
            ts.append(Tensor("conv1d.bias", (self.conv_dim,), "col", linear=False))
        ts += [Tensor("dt_bias", (nh,), "col", linear=False),
               Tensor("A_log", (nh,), "col", linear=False),
               Tensor("D", (nh,), "col", linear=False)]
        if self.gated_norm:
            ts.append(Tensor("mixer_norm", (self.intermediate,), "col", linear=False))
        ts += linear_tensors("out_proj", h, self.intermediate, "row", self.mamba_proj_bias)
        return ts

    def state_bytes(self, tp: int) -> float:
        ssm = self.mamba_num_heads * self.mamba_head_dim * self.ssm_state_size
        conv = self.conv_dim * (self.conv_kernel - 1)
        return (ssm * self.state_dtype_bytes + conv * self.conv_dtype_bytes) / tp


@dataclass(frozen=True)
class Mamba1(Mamba2):
    """Jamba's Mamba (v1) mixer. Its state is Mamba2's with one channel per head and no
    B/C groups: [inner, ssm_state_size] + a conv window over inner (inner = expand * hidden),
    so it is built as Mamba2(mamba_num_heads=inner, mamba_head_dim=1, n_groups=0); TP splits
    the inner channels. The original Mamba (and Falcon-Mamba, whose dt / B / C norms carry no
    weights) has no dt_layernorm / b_layernorm / c_layernorm: dt_bc_norms False."""
    dt_rank: int = 0
    dt_bc_norms: bool = True  # Jamba's learned norms of dt, B and C

    def tensors(self) -> list[Tensor]:
        h, inner, n, r = self.hidden_size, self.intermediate, self.ssm_state_size, self.dt_rank
        ts = [norm_tensor("norm", h)]
        ts += linear_tensors("in_proj", 2 * inner, h, "col", self.mamba_proj_bias)  # x and z
        ts.append(Tensor("conv1d", (inner, self.conv_kernel), "col", linear=False))
        if self.use_conv_bias:
            ts.append(Tensor("conv1d.bias", (inner,), "col", linear=False))
        ts += [Tensor("x_proj", (r + 2 * n, inner), "row"),  # dt, B, C from x
               Tensor("dt_proj", (inner, r), "col"), Tensor("dt_proj.bias", (inner,), "col", linear=False),
               Tensor("A_log", (inner, n), "col", linear=False), Tensor("D", (inner,), "col", linear=False)]
        if self.dt_bc_norms:  # Jamba normalises dt, B and C
            ts += [Tensor("dt_layernorm", (r,), "rep", linear=False), Tensor("b_layernorm", (n,), "rep", linear=False),
                   Tensor("c_layernorm", (n,), "rep", linear=False)]
        ts += linear_tensors("out_proj", h, inner, "row", self.mamba_proj_bias)
        return ts


@dataclass(frozen=True)
class DenseMLP:
    """A dense (gated) MLP: gate, up and down projections."""
    hidden_size: int
    intermediate_size: int
    gated: bool = True  # SwiGLU gate+up; False: up only (Nemotron-H relu2, StarCoder2 gelu)
    bias: bool = False
    norm: bool = True  # False: a parallel block (Cohere) whose MLP shares the attention's norm
    kernels = 4  # norm, gate_up GEMM, activation, down GEMM (residual fused)

    def tensors(self) -> list[Tensor]:
        h, i = self.hidden_size, self.intermediate_size
        ts = [norm_tensor("post_attention_layernorm", h)] if self.norm else []
        if self.gated:
            ts += linear_tensors("gate_proj", i, h, "col", self.bias)
        ts += linear_tensors("up_proj", i, h, "col", self.bias)
        ts += linear_tensors("down_proj", h, i, "row", self.bias)
        return ts


@dataclass(frozen=True)
class MoE:
    """Routed experts (+ optional shared expert). Decode touches only some experts:
    decodescope.model counts the expected distinct ones for B*T tokens."""
    hidden_size: int
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int = 0
    shared_expert_gate: bool = False  # Qwen MoE: a sigmoid gate [1, hidden] on the shared expert
    gated: bool = True
    bias: bool = False  # gpt-oss: expert and router biases
    router_bias: bool = False  # DeepSeek-V3 e_score_correction_bias, gpt-oss router bias
    # Nemotron 3 latent MoE (moe_latent_size): the routed experts run in a narrower latent,
    # fc1_latent_proj [latent, hidden] in and fc2_latent_proj [hidden, latent] out; the
    # router and the shared expert stay at hidden_size
    latent_size: int = 0
    norm: bool = True  # False: a parallel block (Cohere), whose experts read the attention's input norm
    kernels = 8  # norm, router GEMM, top-k, expert GEMMs x2 + act, shared expert, combine

    def tensors(self) -> list[Tensor]:
        h, i, e = self.hidden_size, self.moe_intermediate_size, self.num_experts
        ts = [norm_tensor("post_attention_layernorm", h)] if self.norm else []
        ts.append(Tensor("router", (e, h), "rep", linear=False))
        if self.router_bias:
            ts.append(Tensor("router.bias", (e,), "rep", linear=False))
        x = self.latent_size or h  # the width the experts read and write
        if self.latent_size:
            ts += [Tensor("fc1_latent_proj", (x, h), "rep"), Tensor("fc2_latent_proj", (h, x), "rep")]
        up = 2 * i if self.gated else i
        ts += linear_tensors("experts.gate_up_proj", up, x, "col", self.bias, experts=e)
        ts += linear_tensors("experts.down_proj", x, i, "row", self.bias, experts=e)
        if self.shared_expert_intermediate_size:
            s = self.shared_expert_intermediate_size
            ts += [Tensor("shared_expert.gate_up_proj", (2 * s if self.gated else s, h), "col"),
                   Tensor("shared_expert.down_proj", (h, s), "row")]
            if self.shared_expert_gate:
                ts.append(Tensor("shared_expert_gate", (1, h), "rep", linear=False))
        return ts


@lru_cache(maxsize=256)
def _layer_tensors(layer: "Layer") -> tuple[Tensor, ...]:
    return tuple((layer.mixer.tensors() if layer.mixer else []) + (layer.mlp.tensors() if layer.mlp else [])
                 + list(layer.extra))


Mixer = Attention | MLA | GatedDeltaNet | Mamba2  # Mamba1 is a Mamba2; more in decodescope.arch.mixers
MLP = DenseMLP | MoE


@dataclass(frozen=True)
class Layer:
    kind: str  # "attention", "sliding_attention", "mla", "linear_attention", "mamba", "hybrid", "mlp", "moe"
    mixer: Mixer | None
    mlp: MLP | None
    extra: tuple[Tensor, ...] = ()  # family-specific norms and norm biases (Gemma 2/3 sandwich norms)
    # runs the weights of a layer before it (a shared block, a looped layer): read every pass,
    # held and counted with that layer; its KV cache and state are its own
    reuses: bool = False
    idle: tuple[Tensor, ...] = ()  # held and counted, never read decoding text (ERNIE-4.5-VL's vision experts)

    def tensors(self) -> list[Tensor]:
        return list(_layer_tensors(self))

    @property
    def kernels(self) -> int:
        return (self.mixer.kernels if self.mixer else 0) + (self.mlp.kernels if self.mlp else 0)
