"""Config fields, checked at the edge: every field a family builder reads passes through
`Fields`, which checks its type and a sane range once, before any arithmetic, so that a
hostile or broken config.json ends in one DecodescopeError and never in a traceback, a
negative size or an hour-long loop."""

import math

from decodescope.errors import DecodescopeError

# integer field -> (lowest, highest) accepted. The ceilings sit far above any released
# model (hidden 16384, 128 layers, 384 experts, vocab 262k) and keep every answer fast.
_SIZE = (1, 1 << 20)
_COUNT = (1, 1 << 12)
_OPTIONAL = (0, 1 << 12)
INT_RANGES = {
    **dict.fromkeys(("hidden_size", "intermediate_size", "moe_intermediate_size", "ffn_hidden_size",
                     "intermediate_size_mlp", "kv_lora_rank", "q_lora_rank", "qk_nope_head_dim",
                     "qk_rope_head_dim", "v_head_dim", "head_dim", "global_head_dim", "attention_head_dim", "kv_channels",
                     "linear_key_head_dim", "linear_value_head_dim", "mamba_head_dim", "ssm_state_size",
                     "swa_head_dim", "swa_v_head_dim", "o_lora_rank", "dense_intermediate_size", "sparse_block_size",
                     "sparse_index_dim", "share_expert_dim", "share_q_dim", "expert_ffn_hidden_size", "laurel_rank",
                     "mamba_d_head", "mamba_d_state", "mamba_d_ssm", "mamba_dt_rank", "index_head_dim",
                     "moe_num_shared_experts_size", "shared_intermediate_size", "time_step_rank", "state_size"), _SIZE),
    **dict.fromkeys(("vocab_size", "padded_vocab_size"), (1, 1 << 23)),
    # GPT-2, StarCoder and OPT: the MLP width, the embedding width, the rows of the learned position table
    "ffn_dim": _SIZE, "n_inner": _SIZE, "word_embed_proj_dim": _SIZE,
    **dict.fromkeys(("n_positions", "max_position_embeddings"), (1, 1 << 31)),
    # Falcon's norms per block; Mamba's and MPT's inner widths over hidden
    "num_ln_in_parallel_attn": _COUNT, "expand": _COUNT, "expansion_ratio": _COUNT,
    # Zamba / Zamba2: Mamba heads and groups, shared blocks, the adapters' rank, the attention's width
    **dict.fromkeys(("n_mamba_heads", "mamba_ngroups", "num_mem_blocks"), _COUNT),
    **dict.fromkeys(("adapter_rank", "attention_hidden_size"), _SIZE),
    "gated_norm_rank": _SIZE,  # A.X K2's low-rank gated norms
    "moe_hidden_size": _SIZE,  # Muse Spark: the width its routed experts run at
    # Qwen4-Exp: hashed n-gram tables (orders, heads, the prime search's start, the padding), the
    # hyper-connections' streams and rank, the PLE's width and conv, QSA's indexer
    "ngram_size": (2, 16), "heads_per_ngram": (1, 1024), "ngram_vocab_size_base": (2, 1 << 40),
    "make_ngram_vocab_size_divisible_by": _SIZE, "hc_count": (2, 64), "hc_lowrank": _SIZE, "ple_embed_dim": _SIZE,
    "ple_conv_kernel_size": (1, 64),
    **dict.fromkeys(("indexer_n_heads", "indexer_kv_heads", "indexer_head_dim", "indexer_budget",
                     "indexer_compress_ratio"), (1, 1 << 31)),
    # Dory: its layers' three sections and the loops over the middle one
    **dict.fromkeys(("n_input_layers", "n_output_layers", "n_recurrent_layers"), (0, 1024)),
    "n_recurrent_loops": (1, 256),
    # RecurrentGemma: the RG-LRU's width, its conv taps, the local attention's window
    "lru_width": _SIZE, "conv1d_width": _COUNT, "attention_window_size": (1, 1 << 31),
    # HRM-Text: the layers of each of its two stacks, the loops over them
    "num_layers_per_stack": (1, 1024), "H_cycles": (1, 64), "L_cycles": (1, 64),
    # ZAYA1: the taps of its q/k convolutions, its router MLP's width
    "cca_time0": _COUNT, "cca_time1": _COUNT, "router_hidden_size": _SIZE,
    # Inkling: sliding layers' query heads, relative-bias width and reach, window, short-conv taps, dense layers
    "swa_num_attention_heads": _COUNT, "d_rel": _SIZE, "rel_extent": _SIZE, "sliding_window_size": (1, 1 << 31),
    "conv_kernel_size": _COUNT, "sconv_kernel_size": _COUNT, "num_mtp_layers": (0, 64), "dense_mlp_idx": (0, 1024),
    # Inkling 2 Loop: the looped layers [start, end), their passes, the message gates' rank
    "loop_layer_index_start": (0, 1024), "loop_layer_index_end": (0, 1024), "loop_num_passes": (1, 64),
    "loop_gate_rank": _SIZE,
    # the linear-attention layers transformers 5 writes apart (Kimi Linear, Ling 3.0) and Ling's MLA period
    "linear_head_dim": _SIZE, "linear_num_heads": _COUNT, "layer_group_size": _COUNT,
    # Snowflake Arctic's MoE period and DeepSpeed FP bits, PLaMo 2's Mamba period and head width
    "moe_layer_frequency": _COUNT, "q_bits": (4, 16), "mamba_step": (2, 1 << 12), "hidden_size_per_head": _SIZE,
    # xLSTM's FFN rounding, RWKV-7's low-rank (LoRA) widths
    "ffn_round_up_to_multiple_of": _COUNT, "total_ut_steps": (1, 64),  # and Ouro's loops
    # Phi-4-mini-flash's Mamba period (0: none), Jet-Nemotron's dynamic-conv taps and generator reduction
    "mb_per_layer": (0, 1024), "conv_size": (1, 4096), "dconv_generator_reduction": (1, 1 << 20),
    **dict.fromkeys(("decay_low_rank_dim", "a_low_rank_dim", "v_low_rank_dim", "gate_low_rank_dim"), (1, 1 << 16)),
    # Gemma 3n / 4 per-layer inputs (0 in the Gemma 4 configs without them)
    "hidden_size_per_layer_input": (0, 1 << 20), "vocab_size_per_layer_input": (0, 1 << 23),
    **dict.fromkeys(("num_hidden_layers", "num_layers", "n_layer"), (1, 1024)),
    **dict.fromkeys(("num_attention_heads", "num_key_value_heads", "num_global_key_value_heads", "multi_query_group_num",
                     "swa_num_key_value_heads", "linear_num_key_heads", "linear_num_value_heads", "mamba_num_heads",
                     "mamba_n_heads",
                     "n_groups", "mamba_n_groups", "num_experts_per_tok", "experts_per_token", "moe_topk", "num_experts_per_token",
                     "moe_k", "index_n_heads", "conv_kernel", "linear_conv_kernel_dim", "mamba_d_conv",
                     "mamba_expand", "full_attention_interval", "sliding_window_pattern",
                     "interleave_moe_layer_step", "decoder_sparse_step", "moe_layer_freq",
                     "attn_layer_period", "expert_layer_period", "moe_layer_interval", "conv_L_cache",
                     "block_multiple_of", "o_groups", "hc_mult", "short_conv_kernel_size", "num_heads",
                     "sparse_topk_blocks", "sparse_num_index_heads", "num_attention_groups", "moe_top_k",
                     "global_attn_every_n_layers", "altup_num_inputs", "cla_share_factor"),
                    _COUNT),
    **dict.fromkeys(("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "zero_expert_num"),
                    (0, 1 << 16)),
    **dict.fromkeys(("n_shared_experts", "num_shared_experts", "moe_num_shared_experts", "first_k_dense_replace",
                     "moe_layer_start_index", "attn_layer_offset", "expert_layer_offset", "num_hash_layers",
                     "sparse_local_block", "sparse_init_block", "num_dense_layers", "num_shared_expert",
                     "num_kv_shared_layers"),
                    _OPTIONAL),
    **dict.fromkeys(("shared_expert_intermediate_size", "moe_shared_expert_intermediate_size", "moe_latent_size",
                     "routed_expert_hidden_size"),
                    (0, 1 << 20)),
    # speculative modules: the released ones carry 1 to 3
    **dict.fromkeys(("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules"), (0, 64)),
    **dict.fromkeys(("sliding_window", "attention_chunk_size", "index_topk"), (0, 1 << 31)),
    "window_size": (1, 1 << 31),  # GPT-Neo's local layers: the keys each query sees
    # GLM-5.3-Flash's indexer: keys per pool; GlmMoeDsaConfig's indexer schedule (every freq-th from offset)
    "index_kpool": _COUNT, "index_topk_freq": _COUNT, "index_skip_topk_offset": (0, 1 << 12),
    # Ergo: the dense blocks' width and count, the global-attention period, the window's other name
    "first_dense_intermediate_size": _SIZE, "num_dense_blocks": _OPTIONAL, "global_attention_every_n_layers": _COUNT,
    "local_attention_window": (1, 1 << 31),
    # Kolibri-1.1: its dense layers' width, the indexer's scoring heads, pool, block size, sink and local tokens
    "mlp_only_intermediate_size": _SIZE, "index_num_heads": _COUNT,
    **dict.fromkeys(("index_pool_size", "index_compression"), (1, 1 << 31)),
    **dict.fromkeys(("index_num_sink_tokens", "index_num_local_tokens"), (0, 1 << 31)),
}
MAX_LIST = 4096  # longest per-layer list (layer_types, pattern letters, block_configs)


def _bad(source: str, key: str, v, want: str) -> DecodescopeError:
    shown = repr(v) if len(repr(v)) < 60 else repr(v)[:57] + "..."
    return DecodescopeError(f"{source}: field '{key}' is {shown}, expected {want}",
                            f"fix \"{key}\" in the config (see the model's Hugging Face config.json)")


def check_int(source: str, key: str, v):
    """`v` as an int within INT_RANGES[key]; integral floats (4096.0) are accepted."""
    lo, hi = INT_RANGES[key]
    want = f"an integer from {lo} to {hi}"
    if isinstance(v, float) and math.isfinite(v) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise _bad(source, key, v, want)
    return v


class Fields:
    """Config fields with errors that name the field and the file."""

    def __init__(self, data: dict, source: str):
        self.data, self.source = data, source

    def _checked(self, key: str, v):
        if key in INT_RANGES:
            return check_int(self.source, key, v)
        if isinstance(v, (list, str)) and len(v) > MAX_LIST:
            raise _bad(self.source, key, f"<{len(v)} entries>", f"at most {MAX_LIST} entries")
        return v

    def need(self, key: str, why: str = ""):
        v = self.data.get(key)
        if v is None:
            raise DecodescopeError(
                f"{self.source}: field '{key}' is missing" + (f" (needed for {why})" if why else ""),
                f"add \"{key}\" to the config (see the model's Hugging Face config.json)")
        return self._checked(key, v)

    def get(self, *keys, default=None):
        for k in keys:
            if self.data.get(k) is not None:
                return self._checked(k, self.data[k])
        return default

    def str_(self, key: str, default: str = "") -> str:
        v = self.get(key, default=default)
        if not isinstance(v, str):
            raise _bad(self.source, key, v, "a string")
        return v

    def list_(self, key: str, item: type) -> list | None:
        """A list field whose entries are all of type `item` (None when absent)."""
        v = self.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(x, item) and not isinstance(x, bool) for x in v):
            raise _bad(self.source, key, v, f"a list of {item.__name__}")
        return v

    def with_defaults(self, defaults: dict) -> "Fields":
        """These fields, with a family's published defaults under the keys the config leaves out."""
        return Fields({**defaults, **{k: v for k, v in self.data.items() if v is not None}}, self.source)
