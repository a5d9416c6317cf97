"""Mixers of the newer families, built from the blocks of decodescope.arch.blocks:
Falcon-H1's attention + Mamba2 side by side, LFM2's gated short convolution, MiniMax-M3's
block-sparse attention, DeepSeek-V4's compressed multi-query attention and Kimi Delta
Attention."""

from dataclasses import dataclass

from decodescope.arch.blocks import Attention, Mamba2, PooledKV, StateMixer, Tensor


@dataclass(frozen=True)
class AttentionWithState:
    """Attention whose layer also keeps a fixed state per request (the windows of short
    convolutions: ZAYA's CCA, Inkling): the KV cache is the attention's, the state the
    StateMixer's, the weights all on the attention. One row-parallel output (o_proj): one
    allreduce. A subclass says how many kernels the state's convolutions add."""
    attention: Attention
    state: StateMixer
    state_kernels = 0

    @property
    def parts(self) -> tuple[Attention, StateMixer]:
        return self.attention, self.state

    @property
    def kernels(self) -> int:
        return self.attention.kernels + self.state_kernels

    @property
    def hidden_size(self) -> int:
        return self.attention.hidden_size

    # the head counts tensor parallelism must divide (decodescope.model.deployment)
    @property
    def num_attention_heads(self) -> int:
        return self.attention.num_attention_heads

    @property
    def num_key_value_heads(self) -> int:
        return self.attention.num_key_value_heads

    def tensors(self) -> list[Tensor]:
        return self.attention.tensors()


@dataclass(frozen=True)
class ParallelHybrid(AttentionWithState):
    """Falcon-H1's mixer: attention and a Mamba2 mixer side by side off one input norm, their
    outputs summed. A token keeps both a KV cache (attention) and a recurrent state (Mamba2);
    the weights are both mixers' (the Mamba2's own norm dropped: the attention's is the one)."""
    attention: Attention
    state: Mamba2
    reductions = 2  # TP allreduces: attention's and Mamba2's row-parallel outputs, apart

    @property
    def mamba(self) -> Mamba2:
        return self.state

    @property
    def kernels(self) -> int:
        return self.attention.kernels + self.state.kernels - 1  # one shared input norm

    @property
    def mamba_num_heads(self) -> int:  # TP must divide it too (decodescope.model.deployment)
        return self.state.mamba_num_heads

    def tensors(self) -> list[Tensor]:
        return self.attention.tensors() + [t for t in self.state.tensors() if t.name != "norm"]


@dataclass(frozen=True)
class ShortConv(StateMixer):
    """LFM2's gated short convolution: in_proj to 3 x hidden (gates B, C and the value),
    a depthwise causal conv of conv_L_cache taps over B * value, C times the result, out_proj.
    A request keeps the last conv_L_cache - 1 inputs of each channel: its recurrent state."""
    hidden_size: int
    conv_kernel: int  # conv_L_cache
    bias: bool = False
    state_dtype_bytes: int = 2  # the conv window is kept in the activation dtype (bf16)
    kernels = 6  # norm, in_proj GEMM, gate + conv + gate, out GEMM, residual, (cache update)

    def tensors(self) -> list[Tensor]:
        h, b = self.hidden_size, self.bias
        ts = [Tensor("input_layernorm", (h,), "rep", linear=False), Tensor("in_proj", (3 * h, h), "col"),
              Tensor("conv", (h, self.conv_kernel), "col", linear=False), Tensor("out_proj", (h, h), "row")]
        if b:
            ts += [Tensor("in_proj.bias", (3 * h,), "col", linear=False), Tensor("conv.bias", (h,), "col", linear=False),
                   Tensor("out_proj.bias", (h,), "rep", linear=False)]
        return ts

    def state_bytes(self, tp: int) -> float:
        """Bytes of one request's conv window on one GPU (channels split by TP)."""
        return self.hidden_size * (self.conv_kernel - 1) * self.state_dtype_bytes / tp


@dataclass(frozen=True)
class BlockSparseAttention(Attention):
    """MiniMax-M3's sparse attention (MSA): GQA whose query reads only `topk_tokens` of the
    cache (the top-k blocks of block_size tokens an indexer picks, plus the local block).
    The indexer scores blocks with index_heads query heads of index_dim against ONE
    index key per token, cached beside K and V and replicated on every TP rank."""
    index_heads: int = 0
    index_dim: int = 0
    topk_tokens: int = 0

    def tensors(self) -> list[Tensor]:
        h, i = self.hidden_size, self.index_dim
        return super().tensors() + [Tensor("index_q_proj", (self.index_heads * i, h), "rep"),
                                    Tensor("index_k_proj", (i, h), "rep"),
                                    Tensor("index_q_norm", (i,), "rep", linear=False),
                                    Tensor("index_k_norm", (i,), "rep", linear=False)]

    def kv_bytes_per_token(self, kv_heads: int, dtype_bytes: float) -> float:
        return super().kv_bytes_per_token(kv_heads, dtype_bytes) + self.index_dim * dtype_bytes

    def kv_read_bytes(self, context: int, kv_heads: int, dtype_bytes: float) -> float:
        """K and V of the picked tokens, the index key of every token."""
        kv = super().kv_bytes_per_token(kv_heads, dtype_bytes)
        return min(context, self.topk_tokens) * kv + context * self.index_dim * dtype_bytes

    def attention_flops_per_token(self, heads: float, context: int) -> float:
        index = 2 * self.index_heads * self.index_dim * context * heads / self.num_attention_heads
        return super().attention_flops_per_token(heads, min(context, self.topk_tokens)) + index


def _compressor(name: str, out: int, head_dim: int, ratio: int, h: int) -> list[Tensor]:
    # learned gated pooling of `ratio` tokens into one cache row: kv and gate projections,
    # a position bias per pooled slot, a norm of the pooled row
    return [Tensor(f"{name}.wkv", (out, h), "rep"), Tensor(f"{name}.wgate", (out, h), "rep"),
            Tensor(f"{name}.ape", (ratio, out), "rep", linear=False), Tensor(f"{name}.norm", (head_dim,), "rep", linear=False)]


@dataclass(frozen=True)
class CompressedMQA(PooledKV):
    """DeepSeek-V4 attention: 64-128 query heads against ONE shared K=V head of head_dim
    (MQA), a low-rank query (wq_a / wq_b) and a grouped low-rank output (wo_a per o_group,
    then wo_b), a learned sink per head. Every layer caches the raw last `window` tokens;
    with compress_ratio r > 0 it also caches one pooled row per r tokens (a compressor),
    and at r = 4 an indexer (its own compressor of index_head_dim) picks the index_topk
    pooled rows a query attends to. The cache holds one vector per row, replicated on
    every TP rank, as MLA's latent is."""
    hidden_size: int
    num_attention_heads: int
    head_dim: int
    q_lora_rank: int
    o_lora_rank: int
    o_groups: int
    window: int
    compress_ratio: int = 0  # 0: the raw window only
    index_n_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    num_key_value_heads = 1
    kernels = 14  # norms, q_a, q_b, kv, rope, compressor, indexer, cache write, attention, o_a, o_b, residual

    @property
    def indexed(self) -> bool:
        return self.compress_ratio == 4 and self.index_topk > 0

    def tensors(self) -> list[Tensor]:
        h, n, d, r = self.hidden_size, self.num_attention_heads, self.head_dim, self.compress_ratio
        g, o = self.o_groups, self.o_lora_rank
        ts = [Tensor("input_layernorm", (h,), "rep", linear=False), Tensor("wq_a", (self.q_lora_rank, h), "rep"),
              Tensor("q_norm", (self.q_lora_rank,), "rep", linear=False),
              Tensor("wq_b", (n * d, self.q_lora_rank), "col"), Tensor("wkv", (d, h), "rep"),
              Tensor("kv_norm", (d,), "rep", linear=False), Tensor("attn_sink", (n,), "col", linear=False),
              Tensor("wo_a", (g * o, n * d // g), "col"), Tensor("wo_b", (h, g * o), "row")]
        if r:  # the ratio-4 compressor pools overlapping windows: twice the width
            ts += _compressor("compressor", d * (2 if r == 4 else 1), d, r, h)
        if self.indexed:
            ni, di = self.index_n_heads, self.index_head_dim
            ts += [Tensor("indexer.wq_b", (ni * di, self.q_lora_rank), "rep"),
                   Tensor("indexer.weights_proj", (ni, h), "rep", linear=False)]
            ts += _compressor("indexer.compressor", 2 * di, di, r, h)
        return ts

    @property
    def index_bytes_per_row(self) -> float:
        # fp8 index key + one fp32 scale per 128 values, as DeepSeek-V3.2's indexer cache
        return self.index_head_dim + 4 * -(-self.index_head_dim // 128) if self.indexed else 0

    def _rows(self, context: int) -> tuple[int, int]:
        """(raw window rows, pooled rows) cached for `context` tokens."""
        return min(context, self.window), context // self.compress_ratio if self.compress_ratio else 0

    def kv_cache_bytes(self, context: int, dtype_bytes: float, tp: int) -> float:
        """Bytes of one request's cache over `context` tokens, on every GPU (one KV head: whole at any TP)."""
        raw, pooled = self._rows(context)
        return (raw + pooled) * self.head_dim * dtype_bytes + pooled * self.index_bytes_per_row

    def kv_read_bytes(self, context: int, kv_heads: int, dtype_bytes: float) -> float:
        """Cache bytes one query token reads: the raw window, the pooled rows (the top-k
        the indexer picks, at ratio 4) and, at ratio 4, every index key."""
        raw, pooled = self._rows(context)
        attended = min(pooled, self.index_topk) if self.indexed else pooled
        return (raw + attended) * self.head_dim * dtype_bytes + pooled * self.index_bytes_per_row

    def attention_flops_per_token(self, heads: float, context: int) -> float:
        # scores and values over head_dim for each attended row; the indexer scores
        # every pooled row with its own heads
        raw, pooled = self._rows(context)
        attended = min(pooled, self.index_topk) if self.indexed else pooled
        index = 2 * self.index_n_heads * self.index_head_dim * pooled * heads / self.num_attention_heads
        return 4 * heads * self.head_dim * (raw + attended) + (index if self.indexed else 0)


@dataclass(frozen=True)
class KimiDeltaAttention(StateMixer):
    """Kimi Delta Attention (Kimi Linear): Gated DeltaNet with a decay per channel. q, k, v
    of heads x head_dim each through a short causal conv, a low-rank (or full-rank) decay
    gate f and output gate g, a beta per head. Per request a state [heads, head_dim,
    head_dim] and the conv windows of q, k and v."""
    hidden_size: int
    num_heads: int
    head_dim: int
    conv_kernel: int
    full_rank_gate: bool = False
    state_dtype_bytes: int = 4
    conv_dtype_bytes: int = 2
    kernels = 10  # norm, q/k/v GEMMs, convs, gates, recurrent update, gated norm, out GEMM, residual

    def tensors(self) -> list[Tensor]:
        h, d, p = self.hidden_size, self.head_dim, self.num_heads * self.head_dim
        ts = [Tensor("input_layernorm", (h,), "rep", linear=False)]
        ts += [Tensor(f"{x}_proj", (p, h), "col") for x in "qkv"]
        ts += [Tensor(f"{x}_conv1d", (p, self.conv_kernel), "col", linear=False) for x in "qkv"]
        for gate in "fg":  # decay (f) and output (g) gates: full rank, or through a head_dim bottleneck
            ts += ([Tensor(f"{gate}_proj", (p, h), "col")] if self.full_rank_gate else
                   [Tensor(f"{gate}_a_proj", (d, h), "rep"), Tensor(f"{gate}_b_proj", (p, d), "col")])
        ts += [Tensor("b_proj", (self.num_heads, h), "col"), Tensor("dt_bias", (p,), "col", linear=False),
               Tensor("A_log", (self.num_heads,), "col", linear=False), Tensor("o_norm", (d,), "rep", linear=False),
               Tensor("o_proj", (h, p), "row")]
        return ts

    def state_bytes(self, tp: int) -> float:
        """One request's state on one GPU: [heads, head_dim, head_dim] and 3 conv windows."""
        p = self.num_heads * self.head_dim
        ssm = self.num_heads * self.head_dim * self.head_dim * self.state_dtype_bytes
        return (ssm + 3 * p * (self.conv_kernel - 1) * self.conv_dtype_bytes) / tp



@dataclass(frozen=True)
class LightningAttention(StateMixer):
    """MiniMax-01 / M1 lightning attention: linear attention over heads x head_dim with a fixed
    per-head decay. One qkv_proj, a sigmoid output gate and a norm over all heads; per
    request a state [heads, head_dim, head_dim] (float32) instead of a KV cache."""
    hidden_size: int
    num_heads: int
    head_dim: int
    state_dtype_bytes: int = 4
    kernels = 8  # norm, qkv GEMM, recurrent update, gate GEMM, norm + gate, out GEMM, residual, (cache)

    def tensors(self) -> list[Tensor]:
        h, p = self.hidden_size, self.num_heads * self.head_dim
        return [Tensor("input_layernorm", (h,), "rep", linear=False), Tensor("qkv_proj", (3 * p, h), "col"),
                Tensor("output_gate", (p, h), "col"), Tensor("norm", (p,), "col", linear=False),
                Tensor("out_proj", (h, p), "row")]

    def state_bytes(self, tp: int) -> float:
        """One request's state on one GPU: [heads, head_dim, head_dim], heads split over TP."""
        return self.num_heads * self.head_dim * self.head_dim * self.state_dtype_bytes / tp
