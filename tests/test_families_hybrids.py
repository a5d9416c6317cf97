"""Falcon-H1 and the other families added after tests/test_families.py: the physics of
their layers, with the expectations worked out by hand from the configs."""

from pathlib import Path

from decodescope.arch import ParallelHybrid, load_arch
from decodescope.model import make_deployment
from decodescope.model.memory import per_request_cache

CONFIGS = Path(__file__).parent / "data" / "configs"


def test_falcon_h1_runs_attention_and_mamba2_in_every_layer():
    a = load_arch(str(CONFIGS / "tiiuae__Falcon-H1-7B-Base.trimmed.json"))
    assert a.layer_counts() == {"hybrid": 44} and isinstance(a.layers[0].mixer, ParallelHybrid)
    attn, mamba = a.layers[0].mixer.parts
    # 12 query heads and 2 KV heads of 128: K and V per token and layer 2 x 2 x 128 x 2 B = 1024 B
    assert attn.kv_bytes_per_token(2, 2) == 1024
    # Mamba2: 24 heads x 128 = d_ssm 3072; state 24 x 128 x 256 x 4 B (fp32) = 3,145,728 B,
    # conv window (3072 + 2 x 1 x 256) x (4 - 1) x 2 B = 21,504 B
    assert mamba.state_bytes(1) == 3_145_728 + 21_504
    names = [t.name for t in a.layers[0].tensors()]
    # one input norm for both branches, the MLP's own (pre_ff_layernorm) and nothing else
    assert sorted(n for n in names if "norm" in n) == ["input_layernorm", "post_attention_layernorm"]
    # in_proj: z (3072) + x, B, C (3072 + 2 x 256) + dt (24 heads) = 6680 rows
    assert dict((t.name, t.shape) for t in a.layers[0].tensors())["in_proj"] == (6680, 3072)


def test_falcon_h1_7b_counts_by_hand():
    # transformers' FalconH1DecoderLayer with the 7B config: hidden 3072, 44 layers
    h, v = 3072, 130048
    attn = 12 * 128 * h + 2 * (2 * 128 * h) + h * 12 * 128  # q, k and v (2 KV heads), o: 11,010,048
    conv = 3072 + 2 * 256  # x, B, C through the conv: 3584 channels
    mamba = (3072 + conv + 24) * h + conv * 4 + conv + 3 * 24 + 3072 * h  # in_proj, conv + bias, dt/A/D, out_proj
    mlp = 3 * 12288 * h
    layer = attn + mamba + mlp + 2 * h  # + input and pre-MLP norms: 154,238,536
    a = load_arch(str(CONFIGS / "tiiuae__Falcon-H1-7B-Base.trimmed.json"))
    # untied embedding and head, final norm: 7,585,513,568; the paper's Table 1 gives 7.59 B
    # (https://arxiv.org/abs/2507.22448)
    assert a.params_total == 44 * layer + 2 * v * h + h


def test_falcon_h1_gated_norm_only_with_mamba_rms_norm():
    a = load_arch(str(CONFIGS / "tiiuae__Falcon-H1-0.5B-Base.json"))  # mamba_rms_norm: false
    assert "mixer_norm" not in [t.name for t in a.layers[0].tensors()]
    # d_ssm = 24 heads x mamba_d_head 64 = 1536 (the config gives no mamba_d_ssm)
    assert a.layers[0].mixer.mamba.intermediate == 1536


def test_falcon_h1_request_holds_kv_cache_and_state():
    a = load_arch(str(CONFIGS / "tiiuae__Falcon-H1-7B-Base.trimmed.json"))
    d = make_deployment(a, "h100-sxm", context=1000)
    kv, state = per_request_cache(a, d, a.layers)
    # 44 layers x 1001 tokens (context + the decoded one) x 1024 B; 44 x one state slot
    assert kv == 44 * 1001 * 1024
    assert state == 44 * (3_145_728 + 21_504)


def test_nemotron3_super_routes_experts_in_a_latent():
    a = load_arch(str(CONFIGS / "nvidia__NVIDIA-Nemotron-3-Super-120B-A12B-FP8.json"))
    moe = next(x.mlp for x in a.layers if x.kind == "moe")
    shapes = {t.name: (t.shape, t.experts) for t in moe.tensors()}
    # 512 experts of relu2 (ungated) 2688 between latent 1024 and back; hidden 4096
    assert shapes["experts.gate_up_proj"] == ((2688, 1024), 512)
    assert shapes["experts.down_proj"] == ((1024, 2688), 512)
    assert shapes["fc1_latent_proj"] == ((1024, 4096), 1) and shapes["fc2_latent_proj"] == ((4096, 1024), 1)
    # the shared expert (5376, relu2) and the router stay at hidden width
    assert shapes["shared_expert.gate_up_proj"] == ((5376, 4096), 1) and shapes["router"] == ((512, 4096), 1)
    # routed experts of one layer: 512 x 2 x 2688 x 1024 = 2,818,572,288
    assert sum(t.params for t in moe.tensors() if t.name.startswith("experts.")) == 2_818_572_288
    # one MTP module ("*E"): attention + latent MoE
    assert len(a.mtp) == 1 and a.mtp[0].layer.mlp.latent_size == 1024


def test_nemotron3_ultra_reads_layers_block_type():
    a = load_arch(str(CONFIGS / "nvidia__NVIDIA-Nemotron-3-Ultra-550B-A55B-BF16.json"))
    # the config's layers_block_type list: 48 mamba, 48 moe, 12 attention (no pattern string)
    assert a.layer_counts() == {"mamba": 48, "moe": 48, "attention": 12}
    # the name's A55B counts active parameters without the embedding table, as the Nemotron 3
    # Nano card does ("3.2B active parameters ... (3.6B including embeddings)",
    # https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16): 54.99 B
    assert abs((a.params_active - a.embedding.params) / 1e9 - 55) <= 0.01 * 55


def test_exaone4_every_fourth_layer_is_global_and_q_k_normed_per_head():
    a = load_arch(str(CONFIGS / "LGAI-EXAONE__EXAONE-4.0-32B.json"))
    # sliding_window_pattern 4: layers 3, 7, ..., 63 global, the other 48 within 4096 tokens
    assert [i for i, x in enumerate(a.layers) if x.kind == "attention"] == list(range(3, 64, 4))
    assert a.layers[0].mixer.sliding_window == 4096
    shapes = {t.name: t.shape for t in a.layers[0].tensors()}
    assert shapes["q_norm"] == (128,) and shapes["k_norm"] == (128,)


def test_exaone4_pattern_string_repeats_over_the_layers(write_config):
    import json
    cfg = json.loads((CONFIGS / "LGAI-EXAONE__EXAONE-4.0-32B.json").read_text())
    a = load_arch(write_config({**cfg, "num_hidden_layers": 8, "sliding_window_pattern": "LLLG"}))
    assert [x.kind for x in a.layers] == ["sliding_attention"] * 3 + ["attention"] + \
        ["sliding_attention"] * 3 + ["attention"]


def test_dots1_first_layer_dense_then_deepseek_style_moe():
    a = load_arch(str(CONFIGS / "rednote-hilab__dots.llm1.inst.trimmed.json"))
    assert a.layers[0].mlp.intermediate_size == 10944  # first_k_dense_replace 1
    moe = a.layers[1].mlp
    # 128 experts of 1408, 6 per token, 2 shared experts = one of 2 x 1408, a correction bias
    assert (moe.num_experts, moe.num_experts_per_tok, moe.shared_expert_intermediate_size) == (128, 6, 2816)
    assert moe.router_bias and "q_norm" in [t.name for t in a.layers[0].tensors()]
    assert abs(a.params_active / 1e9 - 14) <= 0.14  # the card's "14B activated"


def test_seed_oss_biases_q_k_v_but_not_o():
    a = load_arch(str(CONFIGS / "ByteDance-Seed__Seed-OSS-36B-Instruct.trimmed.json"))
    names = {t.name: t.shape for t in a.layers[0].tensors()}
    # 80 query heads and 8 KV heads of 128
    assert names["q_proj.bias"] == (10240,) and names["k_proj.bias"] == (1024,) and "o_proj.bias" not in names


def test_lfm2_short_convolutions_keep_a_conv_window_and_the_mlp_is_two_thirds():
    a = load_arch(str(CONFIGS / "LiquidAI__LFM2-1.2B.trimmed.json"))
    # full_attn_idxs [2, 5, 8, 10, 12, 14]: 6 attention layers, 10 convolution layers
    assert [i for i, x in enumerate(a.layers) if x.kind == "attention"] == [2, 5, 8, 10, 12, 14]
    conv = a.layers[0].mixer
    # a request keeps conv_L_cache - 1 = 2 inputs of 2048 channels in bf16: 8192 B per layer
    assert conv.state_bytes(1) == 2 * 2048 * 2
    # block_ff_dim 12288 auto-adjusted: int(2 x 12288 / 3) = 8192, already a multiple of 256
    assert a.layers[0].mlp.intermediate_size == 8192
    # the card's exact figure; tied embeddings (Lfm2Config's default)
    assert a.params_total == 1_170_340_608 and a.tie_word_embeddings
    d = make_deployment(a, "h100-sxm", context=1000)
    kv, state = per_request_cache(a, d, a.layers)
    # 6 attention layers x 1001 tokens x K and V of 8 heads x 64 x 2 B; 10 conv windows
    assert kv == 6 * 1001 * 2 * 8 * 64 * 2 and state == 10 * 8192


def test_mimo_v2_flash_sliding_layers_have_their_own_heads_and_narrow_v():
    a = load_arch(str(CONFIGS / "XiaomiMiMo__MiMo-V2-Flash.json"))
    # hybrid_layer_pattern: 0 (full attention) at 0, 5, 11, ..., 47; the other 39 layers slide
    assert [i for i, x in enumerate(a.layers) if x.kind == "attention"] == [0, 5, 11, 17, 23, 29, 35, 41, 47]
    full, swa = a.layers[0].mixer, a.layers[1].mixer
    # full: 4 KV heads, K 192 + V 128 per head, 2 B: 4 x 320 x 2 = 2560 B a token
    assert full.kv_bytes_per_token(4, 2) == 2560 and not full.sinks
    # sliding: 8 KV heads, 128-token window, a sink per head
    assert swa.kv_bytes_per_token(8, 2) == 5120 and swa.sliding_window == 128 and swa.sinks
    shapes = {t.name: t.shape for t in swa.tensors()}
    # V heads of 128: v_proj 8 x 128 rows, o_proj reads 64 heads x 128
    assert shapes["v_proj"] == (1024, 4096) and shapes["o_proj"] == (4096, 8192) and shapes["k_proj"] == (1536, 4096)
    # layer 0 dense (moe_layer_freq 0), the rest 256 experts, 8 per token
    assert a.layers[0].mlp.intermediate_size == 16384 and a.layers[1].mlp.num_experts == 256
    # the card's "15B active" is given in whole billions: 15.45 B rounds to it
    assert round(a.params_active / 1e9) == 15


def test_deepseek_v4_caches_a_raw_window_and_pooled_rows():
    a = load_arch(str(CONFIGS / "deepseek-ai__DeepSeek-V4-Flash.json"))
    ratios = [x.mixer.compress_ratio for x in a.layers]
    # compress_ratios: 0, 0, then 4 and 128 alternating
    assert ratios[:4] == [0, 0, 4, 128] and ratios.count(4) == 21 and ratios.count(128) == 20
    r4, r128 = a.layers[2].mixer, a.layers[3].mixer
    # ratio 4 at 10,000 tokens: 128 raw rows + 2,500 pooled rows of one 512-wide K=V head,
    # 2 B each, plus 2,500 index keys of 128 fp8 + a 4-byte scale
    assert r4.kv_cache_bytes(10_000, 2, 1) == (128 + 2500) * 512 * 2 + 2500 * 132
    # a query reads the window, the indexer's top 512 pooled rows and every index key
    assert r4.kv_read_bytes(10_000, 1, 2) == (128 + 512) * 512 * 2 + 2500 * 132
    # ratio 128: no indexer, every pooled row (78) is read
    assert r128.kv_read_bytes(10_000, 1, 2) == (128 + 78) * 512 * 2
    shapes = {t.name: t.shape for t in r4.tensors()}
    # grouped output: 8 groups of 64 x 512 / 8 = 4096 inputs to 1024 each, then 8 x 1024 -> 4096
    assert shapes["wo_a"] == (8192, 4096) and shapes["wo_b"] == (4096, 8192) and shapes["wkv"] == (512, 4096)
    # active without the embedding table (13.27 B) rounds to the card's 13B
    assert round((a.params_active - a.embedding.params) / 1e9) == 13


def test_deepseek_v4_cache_in_memory_and_in_the_round():
    a = load_arch(str(CONFIGS / "deepseek-ai__DeepSeek-V4-Flash.json"))
    d = make_deployment(a, "h200", tp=4, context=9_999)
    kv, _ = per_request_cache(a, d, a.layers)
    # 10,000 cached tokens: 2 window-only layers, 21 ratio-4 and 20 ratio-128 layers, bf16
    window, r4 = 128 * 512 * 2, (128 + 2500) * 512 * 2 + 2500 * 132
    r128 = (128 + 78) * 512 * 2
    assert kv == 2 * window + 21 * r4 + 20 * r128


def test_glm45v_text_model_is_glm45_air():
    a = load_arch(str(CONFIGS / "zai-org__GLM-4.5V.json"))
    names = {t.name: t.shape for t in a.layers[1].tensors()}
    # attention_bias: q, k, v biases (96 x 128, 8 x 128), no o_proj bias (Glm4MoeAttention)
    assert names["q_proj.bias"] == (12288,) and names["k_proj.bias"] == (1024,) and "o_proj.bias" not in names
    # layer 0 dense (first_k_dense_replace 1), then 128 experts of 1408 + one shared, a correction bias
    assert a.layers[0].mlp.intermediate_size == 10944 and a.layers[1].mlp.router_bias
    # without the embedding table and the LM head (2 x 151552 x 4096): the card's "12 billion active"
    assert round((a.params_active - 2 * a.embedding.params) / 1e9) == 12


def test_kimi_linear_kda_layers_keep_a_per_channel_state():
    a = load_arch(str(CONFIGS / "moonshotai__Kimi-Linear-48B-A3B-Instruct.trimmed.json"))
    # full_attn_layers [4, 8, ..., 24, 27] are 1-based: MLA at 3, 7, ..., 23, 26
    assert [i for i, x in enumerate(a.layers) if x.kind == "mla"] == [3, 7, 11, 15, 19, 23, 26]
    kda = a.layers[0].mixer
    # state 32 heads x 128 x 128 x 4 B (fp32) + q, k, v conv windows 3 x 4096 x (4 - 1) x 2 B
    assert kda.state_bytes(1) == 32 * 128 * 128 * 4 + 3 * 4096 * 3 * 2
    shapes = {t.name: t.shape for t in kda.tensors()}
    # low-rank decay and output gates through head_dim 128
    assert shapes["f_a_proj"] == (128, 2304) and shapes["g_b_proj"] == (4096, 128)
    # The card's "48B total, 3B activated" are the name's round figures: the routed experts
    # alone are 26 MoE layers x 256 x 3 x 2304 x 1024 = 47.1 B. llama.cpp counts the
    # converted Instruct checkpoint's tensors at 49.12 B ("params" column of llama-bench,
    # https://github.com/ggml-org/llama.cpp/pull/17592).
    assert abs(a.params_total / 1e9 - 49.12) <= 0.01 * 49.12
    # 3.11 B active without the embedding table: the card's "3B" at its one digit
    assert round((a.params_active - a.embedding.params) / 1e9) == 3


def test_falcon_h1_reduces_attention_and_mamba_outputs_apart_under_tp():
    from decodescope.model.ops import layer_ops
    from decodescope.model.predict import expected_rates
    a = load_arch(str(CONFIGS / "tiiuae__Falcon-H1-7B-Base.trimmed.json"))
    d = make_deployment(a, "h100-sxm", tp=2, batch=4)
    ops = layer_ops(a.layers[0], d.weights, d, 4, 1, expected_rates(d))
    reduces = [op for op in ops if op.component == "allreduce"]
    # attention's o_proj and Mamba2's out_proj each reduce, then the MLP's down_proj:
    # 3 messages of 4 tokens x 3072 x 2 B
    assert [op.name for op in reduces] == ["mixer allreduce", "mlp allreduce", "mixer allreduce"]
    assert all(op.bytes == 4 * 3072 * 2 for op in reduces)
    # and both caches: one attention op and one recurrent-state op
    assert [op.component for op in ops if op.component in ("kv_cache", "state")] == ["kv_cache", "state"]


def test_minimax_m3_sparse_layers_read_picked_blocks_and_every_index_key():
    a = load_arch(str(CONFIGS / "MiniMaxAI__MiniMax-M3.json"))
    # sparse_attention_freq: the first 3 layers attend densely, the other 57 sparsely
    assert [x.kind for x in a.layers[:4]] == ["attention"] * 3 + ["sparse_attention"]
    m = a.layers[3].mixer
    # top 16 blocks + 1 local block of 128 tokens
    assert m.topk_tokens == 17 * 128
    # per token: K and V of 4 heads x 128 at 2 B = 2048 B, plus one 128-wide index key = 256 B
    assert m.kv_bytes_per_token(4, 2) == 2048 + 256
    # at 100,000 tokens a query reads 2,176 tokens' K and V and all 100,000 index keys
    assert m.kv_read_bytes(100_000, 4, 2) == 2176 * 2048 + 100_000 * 256
    # dense MLPs (12288) in the first 3 layers, then 128 experts of 3072, 4 per token, + 1 shared
    assert a.layers[2].mlp.intermediate_size == 12288
    moe = a.layers[3].mlp
    assert (moe.num_experts, moe.num_experts_per_tok, moe.shared_expert_intermediate_size) == (128, 4, 3072)
    # the card's "~23B activated" is given in whole billions: 23.50 B without the embedding
    # table and LM head, cut to whole billions
    assert 23 <= (a.params_active - 2 * a.embedding.params) / 1e9 < 24


def test_step37_sliding_layers_take_their_own_heads_and_a_gate_per_head(write_config):
    import json
    cfg = json.loads((CONFIGS / "stepfun-ai__Step-3.7-Flash.json").read_text())
    a = load_arch(str(CONFIGS / "stepfun-ai__Step-3.7-Flash.json"))
    # layer_types: every 4th layer global (0, 4, ..., 44), the rest within 512 tokens
    assert [i for i, x in enumerate(a.layers) if x.kind == "attention"] == list(range(0, 45, 4))
    # first_k_dense_replace 3: dense MLPs (11264), then 288 experts of 1280, 8 per token, + 1 shared
    assert a.layers[2].mlp.intermediate_size == 11264
    moe = a.layers[3].mlp
    assert (moe.num_experts, moe.num_experts_per_tok, moe.shared_expert_intermediate_size) == (288, 8, 1280)
    assert len(a.mtp) == 3  # num_nextn_predict_layers
    # the published schema nests the decoder (step3p5) and widens sliding layers to 96 heads
    text = {**cfg, "model_type": "step3p5", "attention_other_setting": {"num_attention_heads": 96, "head_dim": 128},
            "use_head_wise_attn_gate": True, "moe_layers_enum": ",".join(map(str, range(3, 45)))}
    b = load_arch(write_config({"model_type": "step3p7", "text_config": text}))
    swa, full = b.layers[1], b.layers[0]
    assert swa.mixer.num_attention_heads == 96 and full.mixer.num_attention_heads == 64
    gates = {t.name: t.shape for t in swa.tensors()}
    # one gate scalar per head: g_proj [96, 4096]
    assert gates["g_proj"] == (96, 4096) and b.layers[2].mlp.intermediate_size == 11264


def test_ernie45_dense_ties_embeddings_and_has_no_biases():
    a = load_arch(str(CONFIGS / "baidu__ERNIE-4.5-0.3B-PT.json"))
    names = {t.name: t.shape for t in a.layers[0].tensors()}
    # use_bias false: no projection biases; 16 query heads of 128 (wider than hidden 1024), 2 KV heads
    assert not any(n.endswith(".bias") for n in names)
    assert names["q_proj"] == (2048, 1024) and names["k_proj"] == (256, 1024) and a.tie_word_embeddings


def test_minimax_mtp_modules_named_in_the_config_are_said_not_counted():
    # MiniMax-M2.5's config: "use_mtp": true, "num_mtp_modules": 3, of no published layout
    a = load_arch(str(CONFIGS / "MiniMaxAI__MiniMax-M2.5.json"))
    assert a.mtp == ()
    assert any(n.startswith("config names 3 MTP module(s)") for n in a.notes)
    # a config without such fields says nothing of MTP
    assert not any("MTP" in n for n in load_arch("qwen3-8b").notes)


def test_step37_as_transformers_writes_it(write_config):
    """Step3p7Config's own schema: mlp_layer_types ("dense" / "sparse" per layer, not
    moe_layers_enum), num_sliding_attention_heads, and the per-head gate g_proj on every layer
    (its modeling_step3p7.py builds g_proj whenever the class attribute gating is True).
    By hand, class defaults (45 layers, hidden 4096, 64 heads of 128, 8 KV heads, vocab 128,815
    untied; layers 0-2 dense 11,264, 3-44 288 experts of 1,280 + one shared of 1,280):
      embedding + head 2 x 128,815 x 4,096 = 1,055,252,480, final norm 4,096
      attention a layer: q, o 2 x 33,554,432 + k, v 2 x 4,194,304 + g_proj 64 x 4,096
        + q/k norms 256 = 75,759,872; two norms 8,192
      dense MLP 3 x 4,096 x 11,264 = 138,412,032
      MoE 288 x 3 x 4,096 x 1,280 + shared 15,728,640 + router 288 x 4,096 = 4,546,756,608
      1,055,256,576 + 45 x 75,768,064 + 3 x 138,412,032 + 42 x 4,546,756,608 = 195,843,833,088,
    which transformers 5.24 also counts for its language model on the meta device."""
    a = load_arch(str(CONFIGS / "transformers__Step3p7Config-defaults.json"))
    assert a.params_total == 195_843_833_088
    assert [type(x.mlp).__name__ for x in a.layers[:4]] == ["DenseMLP"] * 3 + ["MoE"]
    assert dict((t.name, t.shape) for t in a.layers[0].tensors())["g_proj"] == (64, 4096)
    # the sliding layers take num_sliding_attention_heads
    import json
    cfg = json.loads((CONFIGS / "transformers__Step3p7Config-defaults.json").read_text())
    text = cfg["text_config"]
    text.update(num_sliding_attention_heads=96, sliding_window=512,
                layer_types=["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(45)])
    b = load_arch(write_config(cfg))
    assert (b.layers[0].mixer.num_attention_heads, b.layers[1].mixer.num_attention_heads) == (64, 96)
    assert b.layers[1].mixer.sliding_window == 512
