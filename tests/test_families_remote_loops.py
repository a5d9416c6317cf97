"""ByteDance Ouro (ouro, decodescope/arch/remote_loops.py). transformers 5.24 has no class for it,
so the count is derived by hand from vLLM's model file (ouro.py).

Ouro-1.4B (tests/data/configs/ByteDance__Ouro-1.4B.trimmed.json; h 2048, 24 layers, 16 heads of
2048 / 16 = 128, MHA, intermediate 5632, vocab 49152, untied, total_ut_steps 4):
  a layer: q/k/v/o 4 x 2048^2 = 16,777,216; gate/up/down 3 x 2048 x 5632 = 34,603,008; four
  RMSNorms 4 x 2048 = 8,192 -> 51,388,416 x 24 = 1,233,321,984 (held once, run 4 times);
  + embedding and head 2 x 49152 x 2048 = 201,326,592 + final norm 2,048 + early_exit_gate
  2048 + 1 = 2,049 -> 1,434,652,673. The card says 1.4B; its bf16 weights file is 2.87 GB
  (https://llmrun.dev/model/bytedance-ouro-1-4b) = 1.435B parameters. Active: the gate is
  never read -> 1,434,650,624.
  KV cache: every loop its own (vLLM builds one Attention a loop): per loop 24 x 2 x 16 x 128
  x 2 bytes = 196,608 bytes a token; 4 loops 786,432."""

import json
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError

OURO = Path(__file__).parent / "data" / "configs" / "ByteDance__Ouro-1.4B.trimmed.json"


def _kv_per_token(arch) -> float:
    """bf16 K + V bytes a token over every pass that keeps its own cache."""
    parts = [p for x in arch.layers for p in getattr(x.mixer, "parts", (x.mixer,)) if hasattr(p, "kv_bytes_per_token")]
    return sum(p.kv_bytes_per_token(p.num_key_value_heads, 2) for p in parts if not p.kv_shared)


def test_ouro_counts_loops_and_kv_per_loop():
    arch = load_arch(str(OURO))
    assert (arch.params_total, arch.params_active) == (1_434_652_673, 1_434_650_624)
    assert abs(arch.params_total / 1.435e9 - 1) < 0.01  # the card's bf16 file: 2.87 GB
    assert len(arch.layers) == 96 and sum(x.reuses for x in arch.layers) == 72
    assert _kv_per_token(arch) == 4 * 196_608 == 786_432
    attn = arch.layers[0].mixer
    assert (attn.num_attention_heads, attn.num_key_value_heads, attn.head_dim, attn.attention_bias) == (16, 16, 128, False)
    assert {t.name for t in arch.layers[0].extra} == {"input_layernorm_2", "post_attention_layernorm_2"}


@pytest.mark.parametrize("loops", [1, 2, 8])
def test_ouro_loops_change_passes_and_cache_not_weights(config_variant, loops):
    arch = load_arch(config_variant(OURO, total_ut_steps=loops))
    assert arch.params_total == 1_434_652_673 and len(arch.layers) == 24 * loops
    assert _kv_per_token(arch) == loops * 196_608


def test_ouro_default_loops_and_bad_loops(config_variant, write_config):
    cfg = json.loads(OURO.read_text())
    del cfg["total_ut_steps"]  # vLLM's getattr default: 4
    assert len(load_arch(write_config(cfg)).layers) == 96
    for bad in (0, -1, 2.5, "4", True, 10**6):
        with pytest.raises(DecodescopeError, match="total_ut_steps"):
            load_arch(config_variant(OURO, total_ut_steps=bad))
