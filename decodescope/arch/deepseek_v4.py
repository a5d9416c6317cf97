"""DeepSeek-V4 (Flash, Pro): compressed multi-query attention (raw sliding window plus
pooled rows every compress_ratio tokens, an indexer at ratio 4), DeepSeek-style MoE with
hash-routed first layers, and hyper-connections (hc_mult copies of the residual stream)."""

from decodescope.arch.blocks import Layer, Tensor
from decodescope.arch.build import moe, nextn_mtp
from decodescope.arch.fields import Fields
from decodescope.arch.layouts import per_layer_words
from decodescope.errors import DecodescopeError


def hyper_connections(f: Fields, parts: tuple[str, str] = ("hc_attn_", "hc_ffn_"),
                      comb: bool = True) -> tuple[Tensor, ...]:
    """The mixing maps of the hc_mult residual copies, one per sub-layer (attention, MLP; `parts`
    prefix their names): fn [mixes, hc x hidden] reads the flattened copies and gives hc "pre"
    weights (the sub-layer's input from the copies), hc "post" weights (its output back into
    them) and, with `comb` (DeepSeek-V4), an hc x hc mix of the copies themselves; base biases
    the mixes, one scale per group. Hy v4 drops the comb (HYV4HyperConnection: fn [2 x hc, ...],
    2 scales). They mix the copies, not the matmuls."""
    hc, h = f.get("hc_mult", default=4), f.need("hidden_size")
    groups = 3 if comb else 2
    mix = (2 + hc) * hc if comb else 2 * hc
    return tuple(t for part in parts
                 for t in (Tensor(f"{part}fn", (mix, hc * h), "rep", linear=False),
                           Tensor(f"{part}base", (mix,), "rep", linear=False),
                           Tensor(f"{part}scale", (groups,), "rep", linear=False)))


def _attention(f: Fields, ratio: int) -> "CompressedMQA":  # noqa: F821 (imported when built)
    from decodescope.arch.mixers import CompressedMQA
    if ratio not in (0, 4, 128):
        raise DecodescopeError(f"{f.source}: compress_ratios holds {ratio}", "DeepSeek-V4 compresses by 0, 4 or 128")
    return CompressedMQA(f.need("hidden_size"), f.need("num_attention_heads"), f.need("head_dim"),
                         f.need("q_lora_rank", "the low-rank query"), f.need("o_lora_rank", "the grouped output"),
                         f.need("o_groups", "the grouped output"), f.need("sliding_window", "the raw KV window"),
                         ratio, f.get("index_n_heads", default=0), f.get("index_head_dim", default=0),
                         f.get("index_topk", default=0) if ratio == 4 else 0)


def _layout(f: Fields, n: int) -> tuple[list[int], int]:
    """Each layer's compress ratio (the MTP module's after them, where given) and how many
    first layers route by hash: DeepSeek's compress_ratios and num_hash_layers, or transformers
    5's layer_types (named by compress_rates; sliding_attention: 0) and mlp_layer_types
    ("hash_moe" / "moe")."""
    if f.get("compress_ratios") is None and f.get("layer_types") is not None:
        rates = {"sliding_attention": 0, **(f.get("compress_rates") or {})}
        types = per_layer_words(f, "layer_types", n, rates)
        kinds = per_layer_words(f, "mlp_layer_types", n, ("hash_moe", "moe")) if f.get("mlp_layer_types") else []
        return [rates[t] for t in types], kinds.count("hash_moe")
    ratios = f.list_("compress_ratios", int) or []
    if len(ratios) < n:
        raise DecodescopeError(f"{f.source}: compress_ratios has {len(ratios)} entries for {n} layers",
                               "one compress ratio (0, 4 or 128) per layer")
    return ratios, f.get("num_hash_layers", default=0)


def build_deepseek_v4(f: Fields):
    """One layer per compress_ratios entry (0: the raw window only); the MTP module takes the
    entry after the last layer."""
    n = f.need("num_hidden_layers")
    ratios, hashed = _layout(f, n)
    shared = f.get("n_shared_experts", default=0) * f.need("moe_intermediate_size")
    hc = hyper_connections(f)
    layers = [Layer("compressed_attention" if r else "sliding_attention", _attention(f, r),
                    # hash-routed layers pick experts by token id: no correction bias
                    moe(f, shared_expert_intermediate_size=shared, router_bias=i >= hashed), hc)
              for i, r in enumerate(ratios[:n])]
    mtp_ratio = ratios[n] if len(ratios) > n else 0
    mtp_layer = Layer("sliding_attention", _attention(f, mtp_ratio),
                      moe(f, shared_expert_intermediate_size=shared, router_bias=True), hc)
    notes = [f"the first {hashed} MoE layers route by token id (a vocab x top-k table, not counted)"] if hashed else []
    return layers, nextn_mtp(f, mtp_layer), tuple(notes)
