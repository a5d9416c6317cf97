"""arch: config.json -> layers and parameter counts, checked against published figures."""

from dataclasses import dataclass
from pathlib import Path

import pytest

from decodescope.arch import GatedDeltaNet, Mamba2, MoE, load_arch
from decodescope.errors import DecodescopeError


@dataclass
class TC:
    preset: str
    url: str  # where the figures below are published
    total_b: str | None  # published total, billions (our convention: embedding + head, tied once)
    active_b: str | None  # published active incl. embedding, where the publisher counts it
    read_b: str | None = None  # published active figure that leaves the embedding table out
    non_embedding_b: str | None = None  # published total without the embedding table and LM head


def _agrees(ours: float, published: str) -> bool:
    """Within 1 %; a figure published with fewer digits than that only tells us our count
    rounds or truncates to it (Qwen3-30B-A3B's "3.3B activated" for 3.35 B, Llama 4
    Maverick's "17B" for 17.18 B): then ours must lie in [published - half a unit of its last
    digit, published + one unit)."""
    p = float(published)
    unit = 10 ** -(len(published.split(".")[1]) if "." in published else 0)
    return abs(ours - p) <= 0.01 * p or p - unit / 2 <= ours < p + unit


# Publishers' figures, compared like with like.
PUBLISHED = [
    # hub pages (safetensors count): 8.03B, 70.6B; the 405B card: 405B
    TC("llama-3.1-8b", "https://huggingface.co/meta-llama/Llama-3.1-8B", "8.03", None),
    TC("llama-3.1-70b", "https://huggingface.co/meta-llama/Llama-3.1-70B", "70.6", None),
    TC("llama-3.1-405b", "https://huggingface.co/meta-llama/Llama-3.1-405B", "405", None),
    # Qwen3 cards: "Number of Parameters: 8.2B / Non-Embedding: 6.95B", "32.8B / 31.2B",
    # "30.5B in total and 3.3B activated / Non-Embedding: 29.9B", "235B in total and 22B
    # activated / Non-Embedding: 234B"; the 8B hub page: 8.19B params
    TC("qwen3-8b", "https://huggingface.co/Qwen/Qwen3-8B", "8.19", None, non_embedding_b="6.95"),
    TC("qwen3-32b", "https://huggingface.co/Qwen/Qwen3-32B", "32.8", None, non_embedding_b="31.2"),
    TC("qwen3-30b-a3b", "https://huggingface.co/Qwen/Qwen3-30B-A3B", "30.5", "3.3", non_embedding_b="29.9"),
    TC("qwen3-235b-a22b", "https://huggingface.co/Qwen/Qwen3-235B-A22B", "235", "22", non_embedding_b="234"),
    # Qwen3.5's names give their totals in whole billions (27B; 35B): our language models
    # count 26.90 B and 34.66 B (the "A3B" in a name is too coarse to check an active count)
    TC("qwen3.5-27b", "https://huggingface.co/Qwen/Qwen3.5-27B", "27", None),
    TC("qwen3.5-35b-a3b", "https://huggingface.co/Qwen/Qwen3.5-35B-A3B", "35", None),
    # "Number of Parameters: 80B in total and 3B activated"
    TC("qwen3-next-80b-a3b", "https://huggingface.co/Qwen/Qwen3-Next-80B-A3B-Instruct", "80", None),
    # "Mixtral has 46.7B total parameters but only uses 12.9B parameters per token"
    TC("mixtral-8x7b", "https://mistral.ai/news/mixtral-of-experts", "46.7", "12.9"),
    # "671B total parameters with 37B activated for each token": DeepSeek's 37B leaves the
    # embedding table out, as OpenAI's figures do
    TC("deepseek-v3", "https://huggingface.co/deepseek-ai/DeepSeek-V3", "671", None, "37"),
    # gpt-oss model card, table of parameter counts: total 116.83B / 20.91B, active per
    # token 5.13B / 3.61B (without the embedding table)
    TC("gpt-oss-120b", "https://arxiv.org/abs/2508.10925", "116.83", None, "5.13"),
    TC("gpt-oss-20b", "https://arxiv.org/abs/2508.10925", "20.91", None, "3.61"),
    # "17B (Activated) 400B (Total)"
    TC("llama-4-maverick", "https://huggingface.co/meta-llama/Llama-4-Maverick-17B-128E-Instruct", "400", "17"),
    # "Nemotron-H-56B-Base-8K": 56B
    TC("nemotron-h-56b", "https://huggingface.co/nvidia/Nemotron-H-56B-Base-8K", "56", None),
    # "31.6B total parameters, ... 3.2B active parameters per forward pass (3.6B including
    # embeddings)"
    TC("nemotron-3-nano-30b-a3b", "https://huggingface.co/nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
       "31.6", "3.6", "3.2"),
]


@pytest.mark.parametrize("tc", PUBLISHED, ids=lambda tc: tc.preset)
def test_param_counts_match_published_figures(tc):
    a = load_arch(tc.preset)
    embedding_and_head = a.embedding.params * (1 if a.tie_word_embeddings else 2)
    for ours, published in ((a.params_total, tc.total_b), (a.params_active, tc.active_b),
                            (a.params_read_per_token, tc.read_b),
                            (a.params_total - embedding_and_head, tc.non_embedding_b)):
        if published is not None:
            assert _agrees(ours / 1e9, published), (tc.preset, ours / 1e9, published, tc.url)


def test_qwen36_27b_counts_by_hand():
    # Qwen3.5-27B config: hidden 5120, MLP 17408, vocab 248320, 48 GDN + 16 gated attention layers
    h, i, v = 5120, 17408, 248320
    attn = h * (24 * 256 * 2) + 2 * h * 4 * 256 + 24 * 256 * h + 2 * 256 + h  # q (with gate), k, v, o, q/k norm, ln
    gdn = h * 10240 + h * 6144 + 2 * h * 48 + 10240 * 4 + 2 * 48 + 128 + 6144 * h + h
    mlp = 3 * h * i + h
    layers = 16 * attn + 48 * gdn + 64 * mlp
    a = load_arch("qwen3.6-27b")
    assert a.params_layers_total == layers
    assert a.params_total == layers + 2 * v * h + h  # untied embedding + head, final norm
    assert a.params_read_per_token == layers + v * h + h  # no embedding table
    assert a.layer_counts() == {"linear_attention": 48, "attention": 16}
    assert len(a.mtp) == 1


@pytest.mark.parametrize("preset, kinds", [
    ("qwen3-next-80b-a3b", {"linear_attention": 36, "attention": 12}),  # from full_attention_interval
    ("gpt-oss-20b", {"sliding_attention": 12, "attention": 12}),
    ("nemotron-h-56b", {"mamba": 54, "mlp": 54, "attention": 10}),
    ("nemotron-3-nano-30b-a3b", {"mamba": 23, "moe": 23, "attention": 6}),
    ("deepseek-v3", {"mla": 61}),
    ("llama-4-maverick", {"sliding_attention": 36, "attention": 12}),  # chunked attention 3 of 4 layers
])
def test_layer_patterns(preset, kinds):
    assert load_arch(preset).layer_counts() == kinds


@pytest.mark.parametrize("preset, moe_layers, dense_layers", [
    ("deepseek-v3", 58, 3),  # first_k_dense_replace 3
    ("llama-4-maverick", 24, 24),  # interleave_moe_layer_step 2
    ("qwen3-30b-a3b", 48, 0),
    ("mixtral-8x7b", 32, 0),
])
def test_moe_layer_placement(preset, moe_layers, dense_layers):
    a = load_arch(preset)
    assert sum(isinstance(layer.mlp, MoE) for layer in a.layers) == moe_layers
    assert sum(layer.mlp is not None and not isinstance(layer.mlp, MoE) for layer in a.layers) == dense_layers


# Per-request recurrent state at TP 1 (conv bf16, SSM fp32), from SGLang's
# mamba_cache_per_req formula (https://github.com/sgl-project/sglang): conv state +
# temporal (SSM) state per linear-attention layer.
@pytest.mark.parametrize("preset, state_bytes", [
    ("qwen3-next-80b-a3b", 77_266_944),
    ("qwen3.6-27b", 153_944_064),
    ("qwen3.6-35b-a3b", 64_389_120),
    ("nemotron-h-56b", 912_605_184),
    ("nemotron-3-nano-30b-a3b", 49_082_368),
])
def test_recurrent_state_per_request_matches_sglang(preset, state_bytes):
    a = load_arch(preset)
    total = sum(layer.mixer.state_bytes(1) for layer in a.layers if isinstance(layer.mixer, (GatedDeltaNet, Mamba2)))
    assert total == state_bytes


def test_mtp_module_sizes():
    # DeepSeek-V3's card: "685B, which includes 671B of the Main Model weights and 14B of the
    # Multi-Token Prediction (MTP) Module weights"; the checkpoint's MTP layer carries its own
    # copies of the embedding table and the head (2 x 0.93 B) besides the module
    # (https://huggingface.co/deepseek-ai/DeepSeek-V3)
    ds = load_arch("deepseek-v3")
    checkpoint = ds.params_total + ds.params_mtp + 2 * ds.embedding.params
    assert abs(checkpoint / 1e9 - 685) <= 0.01 * 685
    assert load_arch("qwen3-next-80b-a3b").notes  # MTP assumed: the config does not list it


LLAMA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
         "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 1000, "torch_dtype": "bfloat16"}


@pytest.mark.parametrize("cfg, windows", [
    ({**LLAMA, "model_type": "gemma2", "sliding_window": 64}, [64, None, 64, None]),
    ({**LLAMA, "model_type": "gemma3_text", "num_hidden_layers": 6, "sliding_window": 32,
      "sliding_window_pattern": 6}, [32, 32, 32, 32, 32, None]),
    ({**LLAMA, "model_type": "mistral", "sliding_window": 4096}, [4096] * 4),
    ({**LLAMA, "model_type": "qwen3", "sliding_window": 4096, "use_sliding_window": False}, [None] * 4),
    ({**LLAMA, "layer_types": ["sliding_attention", "full_attention"] * 2, "sliding_window": 128},
     [128, None, 128, None]),
])
def test_sliding_window_rules(write_config, cfg, windows):
    a = load_arch(write_config(cfg))
    assert [layer.mixer.sliding_window for layer in a.layers] == windows


@pytest.mark.parametrize("preset, head_dim", [("qwen3.6-27b", 256), ("gpt-oss-20b", 64)])
def test_explicit_head_dim_is_not_hidden_over_heads(preset, head_dim):
    # 5120 / 24 heads and 2880 / 64 heads are not the configs' head_dim
    a = load_arch(preset)
    assert {layer.mixer.head_dim for layer in a.layers if "attention" == layer.kind} == {head_dim}


def test_model_folder_and_text_config_nesting(tmp_path, write_config):
    write_config({"architectures": ["X"], "model_type": "wrapper", "tie_word_embeddings": True,
                  "text_config": LLAMA, "vision_config": {"depth": 27}}, "m/config.json")
    a = load_arch(str(tmp_path / "m"))
    assert a.tie_word_embeddings and len(a.layers) == 4
    assert a.params_total == a.params_layers_total + 1000 * 256 + 256  # tied head counted once


def test_non_standard_json_infinity_is_read():
    from decodescope.arch.config import PRESET_DIR
    assert "Infinity" in (Path(PRESET_DIR) / "nvidia__Nemotron-H-56B-Base-8K.json").read_text()
    assert load_arch("nemotron-h-56b").params_total > 0


def test_hub_id_read_from_local_cache(tmp_path, write_config, monkeypatch):
    write_config(LLAMA, "models--acme--tiny/snapshots/0123abc/config.json")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert load_arch("acme/tiny").name == "tiny"
    with pytest.raises(DecodescopeError, match="not in the local hub cache"):
        load_arch("acme/absent")


@pytest.mark.parametrize("cfg, message", [
    ({k: v for k, v in LLAMA.items() if k != "num_attention_heads"}, "field 'num_attention_heads' is missing"),
    ({**LLAMA, "model_type": "bert"}, "model_type='bert'.*not supported"),
    ({**LLAMA, "model_type": "qwen3_next", "full_attention_interval": None}, "full_attention_interval"),
    ({**LLAMA, "layer_types": ["full_attention"]}, "layer_types has 1 entries"),
])
def test_bad_config_names_the_field_and_the_file(write_config, cfg, message):
    path = write_config(cfg)
    with pytest.raises(DecodescopeError, match=message) as e:
        load_arch(path)
    assert path in str(e.value)


def test_unknown_model_suggests_presets():
    with pytest.raises(DecodescopeError, match="qwen3-8b"):
        load_arch("qwen3-8")
