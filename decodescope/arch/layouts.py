"""Per-layer layouts a config may spell in more than one way (a pattern string or an int,
0 / 1 flags, or the per-layer word lists transformers 5 writes), read into one form."""

from decodescope.arch.fields import Fields, check_int
from decodescope.errors import DecodescopeError


def moe_layers_enum(f: Fields, n: int) -> set[int] | None:
    """StepFun's moe_layers_enum, the MoE layers' numbers: "4,5,...,59" in the hub's configs, a
    list in vLLM's config class; None where absent. Numbers past the layers are dropped."""
    enum = f.data.get("moe_layers_enum")
    if enum is None:
        return None
    items = enum.split(",") if isinstance(enum, str) else enum if isinstance(enum, list) else None
    try:
        return {int(i) for i in items if str(i).strip()} & set(range(n))
    except (TypeError, ValueError):
        raise DecodescopeError(f"{f.source}: moe_layers_enum {str(enum)[:40]!r} is not a list of layer numbers",
                               "moe_layers_enum: comma-separated layer indices, e.g. \"3,4,5\"") from None


# the attention kinds of a layer_types list (transformers 5)
ATTENTION_KINDS = ("full_attention", "sliding_attention")


def per_layer_words(f: Fields, key: str, n: int, known) -> list[str]:
    """`key`: one of the `known` words per layer, n layers (the lists transformers 5 writes)."""
    words = f.list_(key, str)
    if words is None or len(words) != n or not set(words) <= set(known):
        raise DecodescopeError(f"{f.source}: {key} must hold one of {', '.join(known)} per layer ({n})", f"fix {key}")
    return words


def minimax_m3_from_v5(f: Fields) -> Fields:
    """MiniMax-M3 as transformers 5 writes it (minimax_m3_vl_text): sparse layers named in
    layer_types ("minimax_m3_sparse") with flat index_* fields, one shared expert of
    shared_intermediate_size (its modeling_minimax_m3_vl.py), read as MiniMax's own config."""
    d = f.data
    if d.get("sparse_attention_config") is not None or d.get("layer_types") is None:
        return f
    sparse = [int(t == "minimax_m3_sparse") for t in f.list_("layer_types", str)]
    cfg = {"use_sparse_attention": any(sparse), "sparse_attention_freq": sparse,
           **{k: d.get(v) for k, v in (("sparse_block_size", "index_block_size"), ("sparse_topk_blocks", "index_topk_blocks"),
                                      ("sparse_local_block", "index_local_blocks"), ("sparse_num_index_heads", "index_n_heads"),
                                      ("sparse_index_dim", "index_head_dim")) if d.get(v) is not None}}
    shared = {"n_shared_experts": 1} if d.get("shared_intermediate_size") and d.get("n_shared_experts") is None else {}
    return Fields({**d, "sparse_attention_config": cfg, **shared}, f.source)


def exaone4_layer_types(f: Fields) -> Fields:
    """EXAONE 4.0's layer_types from sliding_window_pattern, as transformers' Exaone4Config
    derives them: "LLLG" repeats over the layers, an int n makes every n-th layer global;
    no sliding_window makes every layer global."""
    n = f.need("num_hidden_layers")
    pattern = f.data.get("sliding_window_pattern")
    if f.data.get("layer_types") is not None or pattern is None:
        return f
    if not f.get("sliding_window"):
        types = ["full_attention"] * n
    elif isinstance(pattern, str) and pattern and set(pattern) <= {"L", "G"} and len(pattern) <= 64:
        types = ["sliding_attention" if pattern[i % len(pattern)] == "L" else "full_attention" for i in range(n)]
    else:
        p = check_int(f.source, "sliding_window_pattern", pattern)
        types = ["full_attention" if (i + 1) % p == 0 else "sliding_attention" for i in range(n)]
    data = {k: v for k, v in f.data.items() if k != "sliding_window_pattern"}
    return Fields({**data, "layer_types": types}, f.source)


def per_layer_flags(f: Fields, key: str, n: int) -> list[int]:
    flags = f.list_(key, int)
    if flags is None or len(flags) != n or not set(flags) <= {0, 1}:
        raise DecodescopeError(f"{f.source}: {key} must hold one 0 or 1 per layer ({n})", f"fix {key}")
    return flags


def mimo_v2_sliding(f: Fields, n: int) -> tuple[list[int], bool]:
    """The sliding-window flag per layer, and whether the config is transformers 5's: it writes
    layer_types in place of hybrid_layer_pattern and no swa_* fields, its sliding layers having
    twice the K/V heads and a sink per head (modeling_mimo_v2_flash.py: 'SWA layers double the
    kv heads vs full-attention and have attention sinks')."""
    if f.get("hybrid_layer_pattern") is not None or f.get("layer_types") is None:
        return per_layer_flags(f, "hybrid_layer_pattern", n), False
    types = per_layer_words(f, "layer_types", n, ATTENTION_KINDS)
    return [int(t == "sliding_attention") for t in types], True


def bamba_layer_types(f: Fields) -> Fields:
    """Bamba's layer_types from attn_layer_indices (transformers' BambaConfig: attention at
    those indices, Mamba2 elsewhere), for Granite 4.0-H's builder."""
    if f.data.get("layer_types") is not None:
        return f
    n, at = f.need("num_hidden_layers"), f.list_("attn_layer_indices", int) or []
    if not all(0 <= i < n for i in at):
        raise DecodescopeError(f"{f.source}: attn_layer_indices must name layers 0 to {n - 1}", "fix attn_layer_indices")
    return Fields({**f.data, "layer_types": ["attention" if i in at else "mamba" for i in range(n)]}, f.source)
