"""Builders of two more recurrent hybrids: Microsoft Phi-4-mini-flash (phi4flash, "SambaY": a
self-decoder of Mamba and sliding-window differential attention with one full-attention layer,
then a cross-decoder whose attention layers read that layer's KV cache and whose gated memory
units reuse the last Mamba layer's output) and NVIDIA Jet-Nemotron (jet_nemotron: Qwen2.5
layers, most attention replaced by JetBlock linear attention with dynamic convolution kernels).
Shapes follow vLLM's vllm/model_executor/models/phi4flash.py and SGLang's
python/sglang/srt/models/jet_nemotron.py (with the remote code, modeling_phi4flash.py and
NVlabs' jetai/modeling/hf/jet_block.py). Each builder is `(Fields) -> (layers, mtp, notes)`."""

import math
from dataclasses import dataclass

from decodescope.arch.blocks import Attention, DenseMLP, GatedDeltaNet, Layer, Mamba1, Tensor, linear_tensors, norm_tensor
from decodescope.arch.build import STATE_DTYPE_BYTES, attention, state_dtype
from decodescope.arch.classic import biases, even_head_dim, vector, with_tail
from decodescope.arch.fields import Fields, check_int
from decodescope.arch.layouts import per_layer_words
from decodescope.errors import DecodescopeError

# ---- Phi-4-mini-flash (SambaY) -------------------------------------------------------

@dataclass(frozen=True)
class GatedMemoryUnit:
    """SambaY's gated memory unit (vLLM phi4flash.py Phi4Mamba with yoco_cross): in_proj
    [inner, hidden], then the element-wise product of the memory the self-decoder's last Mamba
    layer left (its scan output, inner wide) with silu(in_proj(x)), out_proj [hidden, inner].
    No mixer of its own, so no KV cache and no state: the memory is a per-token activation."""
    hidden_size: int
    inner: int
    kernels = 5  # norm, in_proj GEMM, gate, out GEMM, residual

    def tensors(self) -> list[Tensor]:
        return [norm_tensor("input_layernorm", self.hidden_size),
                *linear_tensors("in_proj", self.inner, self.hidden_size, "col"),
                *linear_tensors("out_proj", self.hidden_size, self.inner, "row")]


def _phi4flash_kinds(f: Fields, n: int) -> list[str]:
    """One kind per layer, as vLLM's SambaYDecoderLayer picks it: Mamba where i % mb_per_layer
    == 0, attention elsewhere; from layer n // 2 + 2 on (yoco_cross) Mamba turns into a gated
    memory unit and attention into cross-attention over layer n // 2 + 1's cache. Below n // 2
    the odd attention layers slide (Phi4FlashConfig's per-layer sliding_window)."""
    mb = f.get("mb_per_layer", default=2)  # Phi4FlashConfig's default
    kinds = []
    for i in range(n):
        cross, mamba = i >= n // 2 + 2, mb > 0 and i % mb == 0
        if mamba:
            kinds.append("gmu" if cross else "mamba")
        else:
            kinds.append("cross_attention" if cross else
                         "sliding_attention" if i < n // 2 and i % 2 == 1 else "attention")
    if n >= n // 2 + 3 and kinds[n // 2 + 1] == "mamba":
        raise DecodescopeError(f"{f.source}: layer {n // 2 + 1} is a Mamba layer, but the cross-decoder's attention "
                               "reads that layer's KV cache (vLLM phi4flash.py: kv_sharing_target_layer_name)",
                               "choose mb_per_layer / num_hidden_layers so that layer n // 2 + 1 attends")
    if "gmu" in kinds and kinds[n // 2] != "mamba":
        raise DecodescopeError(f"{f.source}: layer {n // 2} is not a Mamba layer, but the gated memory units "
                               "reuse its scan output (vLLM phi4flash.py: yoco_kv)",
                               "choose mb_per_layer / num_hidden_layers so that layer n // 2 is Mamba")
    return kinds


def _phi4flash_mamba(f: Fields, h: int) -> Mamba1:
    """Phi4Mamba (Mamba v1): inner = mamba_expand x hidden, dt rank mamba_dt_rank ("auto":
    hidden / 16 rounded up), Phi4FlashConfig's defaults 16 / 4 / 2. vLLM's MambaCacheManager
    keeps both the conv window and the SSM state in the model's dtype (bf16), not float32."""
    inner = f.get("mamba_expand", default=2) * h
    rank = f.data.get("mamba_dt_rank")
    rank = -(-h // 16) if rank in (None, "auto") else check_int(f.source, "mamba_dt_rank", rank)
    return Mamba1(h, inner, 1, 0, f.get("mamba_d_state", default=16), f.get("mamba_d_conv", default=4),
                  bool(f.get("mamba_conv_bias", default=True)), bool(f.get("mamba_proj_bias", default=False)),
                  state_dtype_bytes=2, conv_dtype_bytes=2, dt_rank=rank, dt_bc_norms=False)


def _phi4flash_attention(f: Fields, kind: str, head_dim: int) -> Attention:
    """Differential attention (vLLM SambaYAttention): a biased Wqkv (q only in the cross-decoder,
    which reads layer n // 2 + 1's K/V) and a biased out_proj; K and V cached as GQA's (the
    differential backend's cache [2, 2, blocks, block, kv_heads / 2, head_dim] holds as many)."""
    heads, kv = f.need("num_attention_heads"), f.get("num_key_value_heads", default=f.need("num_attention_heads"))
    if heads % 2 or kv % 2:
        raise DecodescopeError(f"{f.source}: differential attention splits the heads in two: num_attention_heads "
                               f"{heads} and num_key_value_heads {kv} must be even", "fix the head counts")
    window = f.need("sliding_window", "the sliding-window layers") if kind == "sliding_attention" else None
    return attention(f, window, head_dim=head_dim, num_key_value_heads=kv, attention_bias=True, o_bias=True,
                     kv_shared=kind == "cross_attention")


def build_phi4flash(f: Fields):
    """Phi-4-mini-flash (phi4flash): every layer a LayerNorm (weight and bias) before its mixer and
    before a SwiGLU MLP (fc1 [2 x intermediate, hidden], fc2, unbiased). Mixers per
    _phi4flash_kinds: Mamba (a fixed state per request), sliding or full differential attention
    (its own cache; four lambda vectors of head_dim and a subln RMSNorm of 2 x head_dim),
    cross-attention (no cache of its own) and gated memory units (no state). The final LayerNorm
    has a bias too; the head is tied to the embedding."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    d = even_head_dim(f)
    kinds = _phi4flash_kinds(f, n)
    mlp = DenseMLP(h, f.need("intermediate_size", "the MLP"))
    norm_biases = biases(h, "input_layernorm", "post_attention_layernorm")
    diff = tuple(vector(f"lambda_{v}", d) for v in ("q1", "k1", "q2", "k2")) + (vector("subln", 2 * d),)
    mamba = _phi4flash_mamba(f, h) if {"mamba", "gmu"} & set(kinds) else None
    gmu = GatedMemoryUnit(h, mamba.intermediate) if "gmu" in kinds else None

    def layer(kind: str) -> Layer:
        if kind == "mamba":
            return Layer(kind, mamba, mlp, norm_biases)
        if kind == "gmu":
            return Layer(kind, gmu, mlp, norm_biases)
        attn = _phi4flash_attention(f, kind, d)
        kind = "attention" if kind == "sliding_attention" and not attn.sliding_window else kind  # sliding_window 0
        return Layer(kind, attn, mlp, norm_biases + diff)
    notes = ("cross-decoder: layers from n/2 + 2 read layer n/2 + 1's KV cache (no cache of their own); "
             "its gated memory units reuse the last self-decoder Mamba layer's output (no state)",)
    return with_tail([layer(k) for k in kinds], biases(h, "final_layernorm")), [], notes


# ---- Jet-Nemotron -------------------------------------------------------------------

# JetNemotronConfig.layer_types words: JetBlock, full attention, sliding-window attention
JET_KINDS = ("jet", "attn", "swa")


@dataclass(frozen=True)
class JetBlock(GatedDeltaNet):
    """JetBlock (SGLang jet_nemotron.py; NVlabs jet_block.py): Gated DeltaNet's recurrence over
    silu(q), silu(k) and a value run through a dynamic short convolution, whose kernels (conv taps
    per value channel) a small MLP makes from the layer's input: kernel_generator.w1 [value_dim /
    reduction, hidden], silu, w2 [value_dim x conv, value_dim / reduction] with a bias. One head
    count for q, k and v. SGLang sizes its state as Mamba2's pool with n_groups = heads: SSM
    [heads, head_v_dim, head_k_dim] in mamba_ssm_dtype and a conv window over value_dim + 2 x
    key_dim channels (only value_dim of them used) - Gated DeltaNet's state, as inherited."""
    generator_hidden: int = 0
    kernels = 12  # Gated DeltaNet's 10, and the kernel generator's two GEMMs

    def tensors(self) -> list[Tensor]:
        h, nh, k, v = self.hidden_size, self.linear_num_value_heads, self.key_dim, self.value_dim
        taps, g = self.linear_conv_kernel_dim, self.generator_hidden
        return [norm_tensor("input_layernorm", h),
                Tensor("qkvabz_proj", (2 * k + 2 * v + 2 * nh, h), "col"),  # q, k, v, a, beta, z (g_proj)
                Tensor("A_log", (nh,), "col", linear=False), Tensor("dt_bias", (nh,), "col", linear=False),
                # every GPU makes the generator's whole hidden layer: its channels' taps need all of it
                Tensor("dynamic_conv1d.kernel_generator.w1", (g, h), "rep"),
                *linear_tensors("dynamic_conv1d.kernel_generator.w2", v * taps, g, "col", bias=True),
                norm_tensor("o_norm", self.linear_value_head_dim),
                Tensor("o_proj", (h, v), "row")]


def _jet_block(f: Fields, cfg: dict) -> JetBlock:
    """efficient_attention_config["jet"]: num_heads, head_dim (of q and k), expand_v (the value
    head over head_dim; int(head_dim x expand_v) as jet_block.py takes it, which refuses one
    that is not whole), conv_size, dconv_generator_reduction (JetBlockConfig's defaults 6 / 256 /
    2.0 / 4 / 8)."""
    g = Fields(cfg, f.source)
    heads, head_k = g.get("num_heads", default=6), g.get("head_dim", default=256)
    expand = cfg.get("expand_v", 2.0)
    if isinstance(expand, bool) or not isinstance(expand, (int, float)) or not 0 < expand <= 64 \
            or not math.isclose(head_k * expand, round(head_k * expand), rel_tol=1e-5):
        raise DecodescopeError(f"{f.source}: efficient_attention_config.jet.expand_v {expand!r} does not give a "
                               f"whole value head over head_dim {head_k}", "a positive factor, head_dim x expand_v whole")
    head_v = int(head_k * expand)
    taps, red = g.get("conv_size", default=4), g.get("dconv_generator_reduction", default=8)
    return JetBlock(f.need("hidden_size"), heads, heads, head_k, head_v, taps,
                    state_dtype_bytes=STATE_DTYPE_BYTES[state_dtype(f)], generator_hidden=max(1, heads * head_v // red))


def build_jet_nemotron(f: Fields):
    """Jet-Nemotron (jet_nemotron): Qwen2.5's decoder (q/k/v biased, o_proj not; head_dim =
    hidden / heads; a SwiGLU MLP; two RMSNorms a layer) whose layer_types pick per layer a JetBlock
    ("jet", a fixed state per request), full attention ("attn") or sliding-window attention ("swa",
    efficient_attention_config.swa.window_size tokens)."""
    n = f.need("num_hidden_layers")
    types = per_layer_words(f, "layer_types", n, JET_KINDS)
    eac = f.get("efficient_attention_config", default={})
    if not isinstance(eac, dict) or not all(isinstance(eac.get(k, {}), dict) for k in ("jet", "swa")):
        raise DecodescopeError(f"{f.source}: efficient_attention_config must be an object of objects (jet, swa)",
                               "fix efficient_attention_config")
    if "jet" in types and "jet" not in eac:
        raise DecodescopeError(f"{f.source}: layer_types names jet layers, efficient_attention_config has no jet entry",
                               "add efficient_attention_config.jet (num_heads, head_dim, expand_v, conv_size)")
    mlp = DenseMLP(f.need("hidden_size"), f.need("intermediate_size", "the MLP"))
    d = even_head_dim(f)
    full = attention(f, head_dim=d, attention_bias=True, o_bias=False)
    swa = attention(f, Fields(eac.get("swa", {}), f.source).need("window_size", "the swa layers"),
                    head_dim=d, attention_bias=True, o_bias=False) if "swa" in types else None
    jet = _jet_block(f, eac["jet"]) if "jet" in types else None
    mixers = {"jet": ("linear_attention", jet), "attn": ("attention", full), "swa": ("sliding_attention", swa)}
    return [Layer(*mixers[t], mlp) for t in types], [], ()
