"""Remote-code decoders vLLM serves: Snowflake Arctic (a dense residual MLP beside a 128-expert
MoE), xAI Grok-1 / Grok-2 (sandwich-normed MoE, Grok-2 with a dense MLP beside its experts) and
PFN PLaMo 2 (Mamba layers between attention layers, Samba-like). Shapes follow vLLM's
vllm/model_executor/models/arctic.py, grok1.py and plamo2.py. Each builder is
`(Fields) -> (layers, mtp, notes)`, listed in decodescope.arch.registry.FAMILIES."""

from dataclasses import dataclass

from decodescope.arch.blocks import DenseMLP, Layer, Mamba2, Tensor, linear_tensors, norm_tensor
from decodescope.arch.build import STATE_DTYPE_BYTES, attention, moe, state_dtype
from decodescope.arch.fields import Fields
from decodescope.errors import DecodescopeError

# ---- Snowflake Arctic -----------------------------------------------------------------

def _arctic_quant_note(f: Fields) -> tuple[str, ...]:
    """Arctic's own `quantization` field (ArcticQuantizationConfig: q_bits, mantissa_bits,
    group_size) has DeepSpeed quantize the weights to FP8 / FP6 as they load; the checkpoint,
    and so the count, stays 16-bit."""
    quant = f.get("quantization")
    if quant is None:
        return ()
    if not isinstance(quant, dict):
        raise DecodescopeError(f"{f.source}: field 'quantization' is not a JSON object",
                               "fix \"quantization\" (Arctic's DeepSpeed FP quantization: q_bits, mantissa_bits, "
                               "group_size) or set it to null")
    bits = Fields(quant, f.source).get("q_bits", default=8)  # ArcticQuantizationConfig's default
    return (f"quantization: DeepSpeed FP{bits} weights quantized at load time (the checkpoint is "
            f"{f.get('torch_dtype', default='bfloat16')}); pass --weights fp8 to model 8-bit weights",)


def build_arctic(f: Fields):
    """Snowflake Arctic (arctic; vLLM arctic.py ArcticDecoderLayer): GQA attention with unbiased
    q/k/v/o; in the layers where (i + 1) % moe_layer_frequency == 0 a MoE of num_local_experts
    SwiGLU experts of intermediate_size (top num_experts_per_tok, bias-free router), elsewhere one
    dense MLP of intermediate_size. Where use_residual (vLLM; the remote code reads
    parallel_attn_mlp_res) a MoE layer also runs a dense SwiGLU MLP of hidden_size behind its own
    RMSNorm (residual_layernorm), summed with the experts' output: counted as a shared expert of
    hidden_size, which every token reads. Its experts read the layer's input rather than the
    attention's output (the residual MLP runs in parallel with attention): the same weights."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    freq = f.get("moe_layer_frequency", default=2)  # ArcticConfig's default
    residual = bool(f.get("use_residual", "parallel_attn_mlp_res", default=False))
    attn = attention(f, attention_bias=False, o_bias=False)
    dense = DenseMLP(h, f.need("intermediate_size"))
    routed = moe(f, shared_expert_intermediate_size=h if residual else 0)
    extra = (norm_tensor("residual_layernorm", h),) if residual else ()
    layers = [Layer("attention", attn, routed, extra) if (i + 1) % freq == 0 else Layer("attention", attn, dense)
              for i in range(n)]
    return layers, [], _arctic_quant_note(f)


# ---- xAI Grok-1 / Grok-2 ----------------------------------------------------------------

# Grok-2's hub config (xai-org/grok-2) names model_type "git", which transformers gives Microsoft's
# GIT captioner; vLLM dispatches on architectures. Only this architecture is read as Grok
GROK2_ARCHS = ("Grok1ForCausalLM",)


def build_grok(f: Fields):
    """Grok-1 (grok-1; hpcai-tech/grok-1 and its re-exports) and Grok-2 (xai-org/grok-2, whose
    config says model_type "git"), as vLLM's grok1.py builds both: GQA attention (head_dim =
    hidden / heads, unbiased), four RMSNorms a layer (pre_attn_norm, post_attn_norm, pre_moe_norm,
    post_moe_norm), a MoE of num_experts (Grok-1) or num_local_experts (Grok-2) GELU-gated experts
    of moe_intermediate_size (else intermediate_size), top num_experts_per_tok, bias-free router.
    Grok-2 (residual_moe) adds a dense gated MLP of intermediate_size fed by the same norm and
    summed with the experts: counted as a shared expert. The muP multipliers and the logit soft
    caps hold no weights."""
    if f.str_("model_type") == "git":
        archs = f.list_("architectures", str) or []
        if not set(archs) & set(GROK2_ARCHS):
            raise DecodescopeError(f"{f.source}: model_type 'git' ({', '.join(archs) or 'no architectures'}) is "
                                   "Microsoft GIT, an image captioner decodescope does not model",
                                   "model_type git is read only as Grok-2 (architectures Grok1ForCausalLM)")
    f = f.with_defaults({"num_experts": 8, "num_experts_per_tok": 2})  # vLLM grok1.py's getattr defaults
    h, heads = f.need("hidden_size"), f.need("num_attention_heads")
    residual = bool(f.get("residual_moe", default=False))
    attn = attention(f, head_dim=max(1, h // heads), attention_bias=False, o_bias=False)
    routed = moe(f, shared_expert_intermediate_size=f.need("intermediate_size") if residual else 0)
    # pre_attn_norm and pre_moe_norm are the attention's and the MoE's own norms
    extra = (norm_tensor("post_attn_norm", h), norm_tensor("post_moe_norm", h))
    return [Layer("attention", attn, routed, extra)] * f.need("num_hidden_layers"), [], ()


# ---- PFN PLaMo 2 -------------------------------------------------------------------------

@dataclass(frozen=True)
class PlamoMamba(Mamba2):
    """PLaMo 2's Mamba mixer (vLLM plamo2.py Plamo2MambaMixer): in_proj to gate and x
    (2 x heads x head_dim), a depthwise conv over x only (no bias), then bcdt_proj from the
    conv's output to dt (dt_rank), B and C (d_state each, one group), each RMSNorm-ed, dt_proj
    up to one dt per head, A / D / dt_bias per head, out_proj. Its state is Mamba2's with no B/C
    groups in the conv (n_groups 0): ssm [heads, head_dim, d_state] + conv [heads x head_dim,
    d_conv - 1], as vLLM's mamba2_state_shape(n_groups=0) sizes it."""
    dt_rank: int = 0

    def tensors(self) -> list[Tensor]:
        h, inner, heads, n, r = (self.hidden_size, self.intermediate, self.mamba_num_heads, self.ssm_state_size,
                                 self.dt_rank)
        return [norm_tensor("norm", h),
                *linear_tensors("in_proj", 2 * inner, h, "col"),
                Tensor("conv1d", (inner, self.conv_kernel), "col", linear=False),
                Tensor("bcdt_proj", (r + 2 * n, inner), "row"),
                Tensor("dt_proj", (heads, r), "col"),
                *(Tensor(name, (heads,), "col", linear=False) for name in ("A", "D", "dt_bias")),
                norm_tensor("dt_norm", r), norm_tensor("B_norm", n), norm_tensor("C_norm", n),
                *linear_tensors("out_proj", h, inner, "row")]


def plamo2_is_mamba(i: int, n: int, step: int) -> bool:
    """vLLM plamo2.py is_mamba: every layer but one in `step` is Mamba (the middle one of each
    step attends); a model of at most step // 2 layers attends in its last layer only."""
    return i != n - 1 if n <= step // 2 else i % step != step // 2


def build_plamo2(f: Fields):
    """PLaMo 2 (plamo2; pfnet/plamo-2-1b, -8b): Mamba layers (PlamoMamba) and GQA attention
    layers (hidden_size_per_head per head, q/k RMSNorms with a weight per head and channel, as
    vLLM's (heads, head_dim) q_norm / k_norm) interleaved by mamba_step, each with a SwiGLU MLP
    of intermediate_size and four RMSNorms (pre/post mixer, pre/post MLP). Only the attention
    layers cache K/V; each Mamba layer keeps a fixed state per request."""
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    step = f.get("mamba_step", default=2)  # vLLM asserts mamba_step > 1
    head_dim = f.need("hidden_size_per_head", "PLaMo 2's attention")
    heads = f.need("mamba_num_heads", "PLaMo 2's Mamba mixer")
    mamba = PlamoMamba(h, heads, head_dim, 0, f.need("mamba_d_state", "PLaMo 2's Mamba mixer"),
                       f.need("mamba_d_conv", "PLaMo 2's Mamba mixer"),
                       use_conv_bias=False, state_dtype_bytes=STATE_DTYPE_BYTES[state_dtype(f)], gated_norm=False,
                       dt_rank=max(64, h // 16))  # vLLM: time_step_rank = max(64, hidden // 16)
    attn = attention(f, head_dim=head_dim, qk_norm=True, qk_norm_full=True, attention_bias=False, o_bias=False)
    mlp = DenseMLP(h, f.need("intermediate_size"))
    extra = (norm_tensor("post_mixer_norm", h), norm_tensor("post_mlp_norm", h))
    layers = [Layer("mamba", mamba, mlp, extra) if plamo2_is_mamba(i, n, step) else Layer("attention", attn, mlp, extra)
              for i in range(n)]
    notes = (f"sliding_window {f.get('sliding_window')} is not applied: vLLM's plamo2.py attends over the whole "
             "context in every attention layer",) if f.get("sliding_window") else ()
    return layers, [], notes
