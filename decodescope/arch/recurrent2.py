"""Builders of the purely recurrent decoders: NX-AI's xLSTM (mLSTM blocks), RWKV-7 "Goose" as
flash-linear-attention writes it, and RWKV-4 as transformers writes it. None keeps a KV cache:
each layer keeps a fixed state per request (StateMixer).

xLSTM, transformers 5.24 models/xlstm/modeling_xlstm.py (NX-AI's xlstm_large, the 7B's code):
a block is an RMSNorm, the mLSTM layer, an RMSNorm and a SwiGLU FFN (proj_up_gate, proj_up,
proj_down: ffn_proj_factor x hidden rounded up to ffn_round_up_to_multiple_of). The mLSTM layer
projects q, k (int(hidden x qk_dim_factor) each), v and the output gate (int(hidden x
v_dim_factor) each), an input and a forget gate per head (with biases), normalises each head of
the cell's output (a weight of v_dim) and projects back (out_proj); use_bias adds biases to the
projections and norms. weight_mode "fused" stacks the same rows into two matrices: same count.
Per request and head the cell keeps C [qk_head_dim, v_head_dim], n [qk_head_dim] and m [1] in
inference_state_dtype (xLSTMCache.rnn_state; float32 by default).

RWKV-7, fla/models/rwkv7/modeling_rwkv7.py and fla/layers/rwkv7.py: a block is a LayerNorm,
time-mix, a LayerNorm and channel-mix (the first block also a pre_norm). Time-mix has six
token-shift mixes x_r/w/k/v/a/g [hidden], k_k and k_a [hidden], r_k [heads, head_dim], r/k/v/o
projections (v and o value_dim wide), low-rank (LoRA) decay w, in-context rate a, value-residual
v (not in layer 0) and gate g, and a GroupNorm with weight and bias over value_dim. Channel-mix
is x_k [hidden] and a squared-ReLU MLP (key, value). Per request a layer keeps the wkv state
[heads, head_dim, value_dim / heads] (float32, as chunk_rwkv7 returns it) and two token-shift
vectors [hidden] (time-mix's conv_state and channel-mix's ffn_state, in the activation dtype).

RWKV-4, transformers 5.24 models/rwkv/modeling_rwkv.py: time-mix with time_decay, time_first
[attention_hidden_size], three mixes [hidden], key / value / receptance and output; channel-mix
with two mixes, key [intermediate, hidden], receptance [hidden, hidden], value; two LayerNorms
per block (pre_ln on the first). A request keeps five vectors per layer (RwkvModel.forward's
state): the two token shifts in the activation dtype, num / den / max of the WKV in float32.

No engine here serves these (vLLM and SGLang have no model file for them): the layouts follow
the code named above; tensor parallelism is taken to split the heads (the state) as for Mamba."""

import math
from dataclasses import dataclass

from decodescope.arch.blocks import DenseMLP, Layer, StateMixer, Tensor, linear_tensors, norm_tensor
from decodescope.arch.build import STATE_DTYPE_BYTES
from decodescope.arch.classic import biases, split_evenly, vector, with_tail
from decodescope.arch.fields import MAX_LIST, Fields
from decodescope.errors import DecodescopeError

SHIFT_BYTES = 2  # a token-shift vector: the activation dtype (bf16)
# xLSTMConfig's defaults (transformers 5.24), for the fields the 7B's hub config leaves out
XLSTM_DEFAULTS = {"num_heads": 8, "qk_dim_factor": 0.5, "v_dim_factor": 1.0, "ffn_proj_factor": 2.667,
                  "ffn_round_up_to_multiple_of": 64, "use_bias": False, "inference_state_dtype": "float32"}
# RWKV7Config's defaults (fla) for a field the config leaves out: head_dim and the LoRA ranks. A field
# written null is not defaulted: head_dim null takes hidden / num_heads, a null rank RWKV7Attention's formula
RWKV7_DEFAULTS = {"head_dim": 64, "decay_low_rank_dim": 64, "gate_low_rank_dim": 128, "a_low_rank_dim": 64,
                  "v_low_rank_dim": 16}


def _number(f: Fields, key: str, lo: float, hi: float):
    """A real-valued factor (xLSTM's width factors, RWKV-7's hidden_ratio), range-checked: the
    integer fields go through decodescope.arch.fields.INT_RANGES."""
    v = f.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (math.isfinite(v) and lo <= v <= hi):
        raise DecodescopeError(f"{f.source}: field '{key}' is {v!r}, expected a number from {lo} to {hi}",
                               f"fix \"{key}\" in the config")
    return v


@dataclass(frozen=True)
class MLSTM(StateMixer):
    """xLSTM's mLSTM layer with its pre-norm (norm_mlstm)."""
    hidden_size: int
    num_heads: int
    qk_dim: int
    v_dim: int
    bias: bool = False
    state_dtype_bytes: int = 4
    kernels = 9  # norm, q/k/v/o-gate GEMMs, i/f gates, cell step, head norm + gate, out GEMM, residual

    @property
    def linear_num_value_heads(self) -> int:  # TP splits the heads: decodescope.model.deployment checks it divides
        return self.num_heads

    def tensors(self) -> list[Tensor]:
        h, b, nh = self.hidden_size, self.bias, self.num_heads
        ts = [norm_tensor("norm_mlstm", h)] + ([vector("norm_mlstm.bias", h)] if b else [])
        ts += linear_tensors("q", self.qk_dim, h, "col", b) + linear_tensors("k", self.qk_dim, h, "col", b)
        ts += linear_tensors("v", self.v_dim, h, "col", b) + linear_tensors("ogate_preact", self.v_dim, h, "col", b)
        ts += linear_tensors("igate_preact", nh, h, "col", True) + linear_tensors("fgate_preact", nh, h, "col", True)
        ts.append(Tensor("multihead_norm", (self.v_dim,), "col", linear=False))
        if b:
            ts.append(Tensor("multihead_norm.bias", (self.v_dim,), "col", linear=False))
        return ts + linear_tensors("out_proj", h, self.v_dim, "row", b)

    def state_bytes(self, tp: int) -> float:
        """One request's cell state on one GPU: C, n and m of every head, heads split by TP."""
        dqk, dv = self.qk_dim // self.num_heads, self.v_dim // self.num_heads
        return self.num_heads * (dqk * dv + dqk + 1) * self.state_dtype_bytes / tp


def build_xlstm(f: Fields):
    """xLSTM (xLSTM-7b): mLSTM blocks, each with a SwiGLU FFN."""
    g = f.with_defaults(XLSTM_DEFAULTS)  # embedding_dim / num_blocks: families.RENAMES
    h, n, heads = g.need("hidden_size"), g.need("num_hidden_layers"), g.need("num_heads")
    qk = int(h * _number(g, "qk_dim_factor", 1 / h, 64))
    v = int(h * _number(g, "v_dim_factor", 1 / h, 64))
    split_evenly(g, qk, heads, "hidden_size x qk_dim_factor", "num_heads")
    split_evenly(g, v, heads, "hidden_size x v_dim_factor", "num_heads")
    step = g.need("ffn_round_up_to_multiple_of")
    # round_up_to_next_multiple_of as xLSTMConfig writes it: (x + step - 1) // step on the float x
    up = int((h * _number(g, "ffn_proj_factor", 1 / h, 64) + step - 1) // step * step)
    dtype = g.get("inference_state_dtype")
    if not isinstance(dtype, str) or dtype not in STATE_DTYPE_BYTES:
        raise DecodescopeError(f"{f.source}: inference_state_dtype {dtype!r} unknown",
                               f"use one of {', '.join(STATE_DTYPE_BYTES)}")
    bias = bool(g.get("use_bias"))
    mixer = MLSTM(h, heads, qk, v, bias, STATE_DTYPE_BYTES[dtype])
    norm_bias = (vector("norm_ffn.bias", h),) if bias else ()
    layer = Layer("linear_attention", mixer, DenseMLP(h, up, bias=bias), extra=norm_bias)
    # out_norm carries no bias whatever use_bias says (xLSTMModel builds it with the default)
    notes = (f"xLSTM: no KV cache; each layer keeps a matrix memory per head and request ({heads} heads, "
             f"{mixer.state_bytes(1) / 1e6:.1f} MB a layer in {dtype})",)
    return [layer] * n, [], notes


@dataclass(frozen=True)
class RWKV7TimeMix(StateMixer):
    """RWKV-7's time-mix (RWKV7Attention) with its LayerNorm (attn_norm)."""
    hidden_size: int
    num_heads: int
    head_dim: int
    value_dim: int
    decay_rank: int
    a_rank: int
    v_rank: int  # 0: layer 0, which has no value-residual LoRA
    gate_rank: int
    norm_bias: bool = True
    state_dtype_bytes: int = 4
    kernels = 12  # norm, shift-mix, r/k/v GEMMs, 4 LoRAs, wkv step, group norm + gate, out GEMM, residual

    @property
    def linear_num_value_heads(self) -> int:  # TP splits the heads: decodescope.model.deployment checks it divides
        return self.num_heads

    def _lora(self, name: str, rank: int, out: int, bias: bool = True) -> list[Tensor]:
        h = self.hidden_size
        return [Tensor(f"{name}.lora.0", (rank, h), "rep")] + linear_tensors(f"{name}.lora.2", out, rank, "col", bias)

    def tensors(self) -> list[Tensor]:
        h, k, v = self.hidden_size, self.hidden_size, self.value_dim
        ts = [norm_tensor("attn_norm", h)] + ([vector("attn_norm.bias", h)] if self.norm_bias else [])
        ts += [vector(f"x_{c}", h) for c in "rwkvag"]
        ts += [Tensor(name, (k,), "col", linear=False) for name in ("k_k", "k_a", "r_k")]  # r_k: heads x head_dim
        ts += [Tensor("r_proj", (k, h), "col"), Tensor("k_proj", (k, h), "col"), Tensor("v_proj", (v, h), "col")]
        ts += self._lora("w_lora", self.decay_rank, k) + self._lora("a_lora", self.a_rank, k)
        ts += self._lora("v_lora", self.v_rank, v) if self.v_rank else []
        ts += self._lora("g_lora", self.gate_rank, v, bias=False)
        ts += [Tensor("g_norm", (v,), "col", linear=False), Tensor("g_norm.bias", (v,), "col", linear=False)]
        return ts + [Tensor("o_proj", (h, v), "row")]

    def state_bytes(self, tp: int) -> float:
        """One request's state on one GPU: the wkv state (heads split by TP) and the two token
        shifts of the layer's input, which every GPU holds whole."""
        wkv = self.head_dim * self.value_dim * self.state_dtype_bytes / tp  # heads x head_dim x (value_dim / heads)
        return wkv + 2 * self.hidden_size * SHIFT_BYTES


def _rwkv7_rank(g: Fields, key: str, h: int, head_dim: int) -> int:
    """A LoRA rank of RWKV7Attention: the config's, or where it is null the layer's formula."""
    if g.data.get(key, RWKV7_DEFAULTS[key]) is not None:  # absent: RWKV7Config's default
        return g.with_defaults(RWKV7_DEFAULTS).need(key)
    scale = {"decay_low_rank_dim": 2.5 * head_dim / 64, "a_low_rank_dim": 2.5 * head_dim / 64,
             "v_low_rank_dim": 1.7 * head_dim / 64, "gate_low_rank_dim": 5.0}[key]
    return max(32, int(round(scale * h**0.5 / 32) * 32))


def _rwkv7_value_dims(g: Fields, h: int, n: int) -> list[int]:
    """value_dim per layer: null (hidden_size), one int, or a list (RWKV7Config)."""
    vd = g.data.get("value_dim")
    dims = [h] * n if vd is None else [vd] * n if not isinstance(vd, list) else vd
    if len(dims) != n or len(dims) > MAX_LIST or not all(
            isinstance(x, int) and not isinstance(x, bool) and h <= x <= 64 * h and x % h == 0 for x in dims):
        raise DecodescopeError(f"{g.source}: value_dim must be null, or one multiple of hidden_size {h} "
                               f"(at most 64x), or a list of {n} such", "fix value_dim")
    return dims


def _rwkv7_ffn(g: Fields, h: int) -> int:
    if g.data.get("intermediate_size") is not None:
        return g.need("intermediate_size")
    ratio = _number(g, "hidden_ratio", 1 / h, 64) if g.data.get("hidden_ratio") is not None else 4
    return 32 * -(-int(h * ratio) // 32)  # RWKV7FeedForward: hidden x ratio, up to a multiple of 32


def build_rwkv7(f: Fields):
    """RWKV-7 (fla's RWKV7ForCausalLM): time-mix and a squared-ReLU channel-mix in every layer."""
    if f.get("attn") is not None:
        raise DecodescopeError(f"{f.source}: attn names softmax-attention layers among the RWKV-7 layers",
                               "decodescope builds RWKV-7 configs with attn null (every released one)")
    h, n = f.need("hidden_size"), f.need("num_hidden_layers")
    if "head_dim" not in f.data or f.data["head_dim"] is not None:  # RWKV7Attention: head_dim wins over num_heads
        head_dim = f.with_defaults({"head_dim": RWKV7_DEFAULTS["head_dim"]}).need("head_dim")
    else:
        head_dim = split_evenly(f, h, f.need("num_heads", "RWKV-7 heads (head_dim is null)"), "hidden_size", "num_heads")
    heads = split_evenly(f, h, head_dim, "hidden_size", "the heads' head_dim")
    ranks = [_rwkv7_rank(f, k, h, head_dim) for k in ("decay_low_rank_dim", "a_low_rank_dim", "v_low_rank_dim",
                                                       "gate_low_rank_dim")]
    norm_bias = bool(f.get("norm_bias", default=True))
    ffn = DenseMLP(h, _rwkv7_ffn(f, h), gated=False)  # key, value; post_attention_layernorm is ffn_norm
    extra = (vector("x_k", h),) + ((vector("ffn_norm.bias", h),) if norm_bias else ())
    layers = []
    for i, vd in enumerate(_rwkv7_value_dims(f, h, n)):
        split_evenly(f, vd, heads, "value_dim", "the heads")
        mix = RWKV7TimeMix(h, heads, head_dim, vd, ranks[0], ranks[1], ranks[2] if i else 0, ranks[3], norm_bias)
        first = i == 0 and f.get("norm_first", default=True)  # RWKV7Block: a pre_norm on the first block
        pre = (norm_tensor("pre_norm", h),) + ((vector("pre_norm.bias", h),) if norm_bias else ()) if first else ()
        layers.append(Layer("linear_attention", mix, ffn, extra=extra + pre))
    tail = biases(h, "norm") if norm_bias else ()
    return with_tail(layers, tail), [], ("RWKV-7: no KV cache; each layer keeps a wkv state and two token shifts",)


@dataclass(frozen=True)
class RWKV4TimeMix(StateMixer):
    """RWKV-4's time-mix (RwkvSelfAttention) with its LayerNorm (ln1)."""
    hidden_size: int
    attention_hidden_size: int
    state_dtype_bytes: int = 4
    kernels = 8  # norm, shift-mix, k/v/r GEMMs, wkv step, gate, out GEMM, residual

    def tensors(self) -> list[Tensor]:
        h, a = self.hidden_size, self.attention_hidden_size
        ts = [norm_tensor("ln1", h), vector("ln1.bias", h)]
        ts += [Tensor(name, (a,), "col", linear=False) for name in ("time_decay", "time_first")]
        ts += [vector(f"time_mix_{c}", h) for c in ("key", "value", "receptance")]
        ts += [Tensor(name, (a, h), "col") for name in ("key", "value", "receptance")]
        return ts + [Tensor("output", (h, a), "row")]

    def state_bytes(self, tp: int) -> float:
        """num, den and max of the WKV (float32, channels split by TP) and two token shifts, whole."""
        return 3 * self.attention_hidden_size * self.state_dtype_bytes / tp + 2 * self.hidden_size * SHIFT_BYTES


def build_rwkv(f: Fields):
    """RWKV-4 (transformers' RwkvForCausalLM)."""
    h, n = f.need("hidden_size"), f.need("num_hidden_layers")
    att = f.get("attention_hidden_size", default=h)
    inter = f.need("intermediate_size") if f.data.get("intermediate_size") is not None else 4 * h
    # channel-mix: key [inter, h] and value [h, inter] as an ungated MLP, receptance [h, h] beside them
    extra = (vector("ln2.bias", h), vector("time_mix_key", h), vector("time_mix_receptance", h),
             Tensor("receptance", (h, h), "rep"))
    layer = Layer("linear_attention", RWKV4TimeMix(h, att), DenseMLP(h, inter, gated=False), extra=extra)
    first = Layer(layer.kind, layer.mixer, layer.mlp, extra + (norm_tensor("pre_ln", h), vector("pre_ln.bias", h)))
    return with_tail([first] + [layer] * (n - 1), biases(h, "ln_out")), [], (
        "RWKV-4: no KV cache; each layer keeps five vectors per request",)
