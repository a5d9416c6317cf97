"""Decoders of hub models that run remote code (trust_remote_code) and name a model_type of their
own: openbmb's MiniCPM 1-4 (minicpm), MiniCPM-V / MiniCPM-o (minicpmv, minicpmo), StepFun's Step3
(step3_text, step3_vl) and Qwen v1 (qwen). Their layouts follow vLLM's model files (vllm/model_executor/models/
minicpm.py, minicpmv.py, step3_text.py), as transformers has no class to build them."""

from dataclasses import dataclass

from decodescope.arch.blocks import Attention, DenseMLP, Layer, Tensor, norm_tensor
from decodescope.arch.build import build_decoder, moe
from decodescope.arch.families import rename
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import moe_layers_enum
from decodescope.errors import DecodescopeError

# InfLLM v2 (MiniCPM4's sparse_config) fields a note names: tokens per block, blocks picked
INFLLM_FIELDS = ("block_size", "topk", "window_size", "dense_len")


def _infllm_note(f: Fields) -> tuple[str, ...]:
    sparse = f.get("sparse_config")
    if sparse is None:
        return ()
    if not isinstance(sparse, dict):
        raise DecodescopeError(f"{f.source}: sparse_config is not a JSON object",
                               "fix sparse_config (MiniCPM4's InfLLM v2 settings) or remove it")
    shown = ", ".join(f"{k} {sparse[k]}" for k in INFLLM_FIELDS if k in sparse)
    return (f"sparse_config (InfLLM v2: {shown}): past dense_len tokens a query reads only its top-k "
            "blocks, the initial and the local-window ones, scored against mean-pooled keys; counted as "
            "dense attention, as vLLM and SGLang serve MiniCPM4 (an upper bound on the KV bytes read "
            "at long context)",)


def build_minicpm(f: Fields):
    """MiniCPM-1B / 2B, MiniCPM4 and MiniCPM-MoE-8x2B (minicpm): Llama's tensors (MiniCPMAttention's
    unbiased q/k/v/o, RMSNorms before attention and MLP, a SwiGLU MLP); with num_experts every MLP is
    num_experts routed SwiGLU experts of intermediate_size and a bias-free router (MiniCPMMoE, no
    shared expert). The muP scalars (scale_emb on the embedding, scale_depth / sqrt(layers) on each
    residual, hidden_size / dim_model_base dividing the head's input) hold no weights. MiniCPMConfig
    ties the head by default (registry.TIED_BY_DEFAULT)."""
    layers, mtp, notes = build_decoder(Fields({**f.data, "model_type": "llama"}, f.source))
    return layers, mtp, notes + _infllm_note(f)


# the language model each MiniCPM-V version runs (vLLM's minicpmv.py _SUPPORT_VERSION: MiniCPMModel,
# LlamaModel, Qwen2Model, LlamaForCausalLM, Qwen3ForCausalLM)
MINICPMV_DECODERS = {(2, 0): "minicpm", (2, 5): "llama", (2, 6): "qwen2", (4, 0): "llama", (4, 5): "qwen3"}


def _minicpmv_version(f: Fields) -> tuple[int, int]:
    """`version` ("2.6", 4.5), else vLLM's guess: 2.0 for MiniCPM-V 2's shape (hidden 2304,
    64 resampler queries), 2.5 otherwise."""
    v = f.data.get("version")
    if v is None:
        return (2, 0) if f.data.get("hidden_size") == 2304 and f.data.get("query_num") == 64 else (2, 5)
    parts = str(v).split(".")
    version = tuple(int(p) for p in parts) if len(parts) == 2 and all(p.isdigit() for p in parts) else None
    if version not in MINICPMV_DECODERS:
        raise DecodescopeError(f"{f.source}: MiniCPM-V version {str(v)[:10]!r} is not one decodescope knows",
                               f"versions: {', '.join(f'{a}.{b}' for a, b in MINICPMV_DECODERS)}")
    return version


def build_minicpmv(f: Fields):
    """MiniCPM-V / MiniCPM-o (minicpmv, minicpmo): a vision encoder and resampler (not counted)
    before a language model whose fields the config holds flat, picked by `version` as vLLM
    picks it (MINICPMV_DECODERS)."""
    version = _minicpmv_version(f)
    decoder = MINICPMV_DECODERS[version]
    g = Fields({**f.data, "model_type": decoder}, f.source)
    layers, mtp, notes = build_minicpm(g) if decoder == "minicpm" else build_decoder(g)
    return layers, mtp, (*notes, f"MiniCPM-V {version[0]}.{version[1]}: its language model is read as {decoder}")


@dataclass(frozen=True)
class FactorizedQueryAttention(Attention):
    """Step3's multi-matrix factorization attention (Step3TextAttention): one K/V head for all query
    heads; the query runs through a narrow shared projection (q_proj to share_q_dim, replicated
    under TP, as are k_proj and v_proj), an RMSNorm (inter_norm), then wq out to the heads."""
    share_q_dim: int = 0

    def tensors(self) -> list[Tensor]:
        h, d, q = self.hidden_size, self.head_dim, self.share_q_dim
        heads = self.num_attention_heads * d
        return [norm_tensor("input_layernorm", h), Tensor("q_proj", (q, h), "rep"), Tensor("k_proj", (d, h), "rep"),
                Tensor("v_proj", (d, h), "rep"), norm_tensor("inter_norm", q), Tensor("wq", (heads, q), "col"),
                Tensor("o_proj", (h, heads), "row")]


def build_step3(f: Fields):
    """StepFun Step3's language model (Step3TextForCausalLM): factorized-query attention with one
    shared K/V head of head_dim (so a token caches 2 x head_dim values a layer, whole on every
    GPU); moe_layers_enum layers run moe_num_experts experts (moe_top_k a token, a bias-free
    router) beside a shared expert MLP of share_expert_dim, the others a dense MLP."""
    f = rename(f, {"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_top_k"})
    n, h = f.need("num_hidden_layers"), f.need("hidden_size")
    why = "Step3's attention"
    attn = FactorizedQueryAttention(h, f.need("num_attention_heads", why), 1, f.need("head_dim", why),
                                    share_q_dim=f.need("share_q_dim", why))
    routed = moe(f, shared_expert_intermediate_size=f.need("share_expert_dim", "Step3's shared expert"))
    at = moe_layers_enum(f, n)
    at = set(range(1, n)) if at is None else at  # vLLM's default: every layer but the first
    dense = DenseMLP(h, f.need("intermediate_size"))
    return [Layer("attention", attn, routed if i in at else dense) for i in range(n)], [], ()


def build_qwen_v1(f: Fields):
    """Qwen (v1: Qwen-1.8B / 7B / 14B / 72B, model_type qwen, QWenLMHeadModel): Qwen2's tensors
    under other names. c_attn is q, k and v of all heads with one bias (Qwen2's biased q/k/v), no
    bias on c_proj; its MLP's w1 and w2 are each intermediate_size / 2 wide (modeling_qwen.py:
    ff_dim_in = intermediate_size // 2), c_proj back; kv_channels is the head size."""
    g = {**f.data, "model_type": "qwen2", "intermediate_size": f.need("intermediate_size") // 2,
         "head_dim": f.get("kv_channels", "head_dim")}
    return build_decoder(Fields({k: v for k, v in g.items() if v is not None}, f.source))
