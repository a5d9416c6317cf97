"""SK Telecom A.X K2 (axk2; transformers' models/axk2/modular_axk2.py): DeepSeek-V3.2's decoder
(MLA with a low-rank query, the lightning indexer and top-k sparse attention, dense first layers
then DeepSeek-style MoE with a shared expert) with two changes: no q_b_proj, but one fused
q_gate_proj that reads cat(q_a_layernorm(q), q) [2 x q_lora_rank] and writes each head's query
and an output gate of v_head_dim (sigmoid(gate) times the attention output, before o_proj);
input_layernorm in every layer and post_attention_layernorm in the MoE layers are gated
RMSNorms (AXK2GatedRMSNorm: y = RMSNorm(x), y x sigmoid(fc2(SiLU(fc1(y))))), fc1 [rank, hidden]
and fc2 [hidden, rank]; the dense layers keep a plain post-attention RMSNorm."""

from dataclasses import asdict, dataclass

from decodescope.arch.blocks import MLA, MoE, Layer, Tensor
from decodescope.arch.build import nextn_mtp
from decodescope.arch.fields import Fields
from decodescope.arch.mla_families import router_biased_mlp
from decodescope.errors import DecodescopeError

# AXK2Config's defaults for the fields read here that DeepSeek's configs lack or default
# otherwise (first_k_dense_replace: its __post_init__'s where no mlp_layer_types is given)
AXK2_DEFAULTS = {"index_topk": 2048, "index_head_dim": 128, "index_n_heads": 16, "gated_norm_rank": 16,
                 "n_shared_experts": 1, "first_k_dense_replace": 1}


def gated_norm(name: str, hidden: int, rank: int) -> tuple[Tensor, ...]:
    """The low-rank gate of a gated RMSNorm `name` (its norm weight is the block's own). Kept
    16-bit and charged no FLOPs: 4 x rank x hidden per token (0.46 MFLOP at rank 16, hidden
    7168), next to a layer's ~1 GFLOP."""
    return (Tensor(f"{name}.mlp.fc1", (rank, hidden), "rep", linear=False),
            Tensor(f"{name}.mlp.fc2", (hidden, rank), "rep", linear=False))


@dataclass(frozen=True)
class GatedQueryMLA(MLA):
    """MLA whose query and output gate come from one q_gate_proj [heads x (qk_head_dim +
    v_head_dim), 2 x q_lora_rank] in place of q_b_proj, behind a gated input_layernorm."""
    gate_rank: int = 16
    kernels = 15  # MLA's 12 (q_gate in q_b's place), the gate product after attention, fc1 and fc2

    def tensors(self) -> list[Tensor]:
        n, qk = self.num_attention_heads, self.qk_nope_head_dim + self.qk_rope_head_dim
        ts = [t for t in super().tensors() if t.name != "q_b_proj"]
        ts.append(Tensor("q_gate_proj", (n * (qk + self.v_head_dim), 2 * self.q_lora_rank), "col"))
        return ts + list(gated_norm("input_layernorm", self.hidden_size, self.gate_rank))


@dataclass(frozen=True)
class GatedNormMoE(MoE):
    """A MoE block behind a gated post_attention_layernorm."""
    gate_rank: int = 16
    kernels = 10  # MoE's 8, fc1 and fc2

    def tensors(self) -> list[Tensor]:
        return super().tensors() + list(gated_norm("post_attention_layernorm", self.hidden_size, self.gate_rank))


def _gate_rank(f: Fields) -> int:
    """gated_norm_rank (a positive int, fields.INT_RANGES), at most hidden_size."""
    rank, h = f.need("gated_norm_rank", "the gated norms"), f.need("hidden_size")
    if rank > h:
        raise DecodescopeError(f"{f.source}: field 'gated_norm_rank' is {rank!r}, expected an integer from 1 to "
                               f"hidden_size ({h})", "fix \"gated_norm_rank\" (16 in AXK2Config)")
    return rank


def _layer(f: Fields, i: int, rank: int) -> Layer:
    """Layer i (i = num_hidden_layers: an MTP module's layer, as DeepSeek's)."""
    mla = GatedQueryMLA(f.need("hidden_size"), f.need("num_attention_heads"),
                        f.need("q_lora_rank", "the fused query / gate projection"), f.need("kv_lora_rank", "MLA"),
                        f.need("qk_nope_head_dim", "MLA"), f.need("qk_rope_head_dim", "MLA"),
                        f.need("v_head_dim", "MLA"), index_n_heads=f.need("index_n_heads", "the indexer"),
                        index_head_dim=f.need("index_head_dim", "the indexer"),
                        index_topk=f.need("index_topk", "the indexer"), gate_rank=rank)
    mlp = router_biased_mlp(f, i)  # routers with a correction bias, as every DeepSeek-V3-style sigmoid router
    if isinstance(mlp, MoE):
        mlp = GatedNormMoE(**asdict(mlp), gate_rank=rank)
    return Layer("mla", mla, mlp)


def build_axk2(f: Fields):
    """A.X K2: every layer gated-query MLA with its own indexer; DeepSeek next-n MTP modules
    where the config asks for them (num_nextn_predict_layers; transformers builds none)."""
    f = f.with_defaults(AXK2_DEFAULTS)
    n, topk = f.need("num_hidden_layers"), f.need("index_topk", "the indexer")
    if topk < 1:  # AXK2Attention builds its indexer in every layer
        raise DecodescopeError(f"{f.source}: index_topk 0: A.X K2 attends to the top-k tokens its indexer picks",
                               "give index_topk (2048 in AXK2Config)")
    rank = _gate_rank(f)
    layers = [_layer(f, i, rank) for i in range(n)]
    notes = (f"sparse attention: each token attends to the top {topk} cached tokens its indexer picks",)
    return layers, nextn_mtp(f, _layer(f, n, rank)), notes
