"""Meta Chameleon (chameleon) and BAAI Emu3 (emu3): decoders over text and image tokens alike.
Counts are transformers 5.24's on the meta device (ChameleonForConditionalGeneration /
Emu3ForConditionalGeneration, the VQ-VAE left out), derived by hand here."""

import json
from pathlib import Path

from decodescope.arch import load_arch
from decodescope.model import make_deployment
from decodescope.model.memory import weights_held_per_stage

CONFIGS = Path(__file__).parent / "data" / "configs"


def test_chameleon_counts_a_layernorm_per_query_and_key_head():
    """ChameleonConfig() (the 7B shape): 32 layers, hidden 4096, 32 heads and 32 KV heads of 128,
    MLP 11008, vocab 65536 untied. A layer: q, k, v, o 4 x 4096^2 = 67,108,864; q_norm and
    k_norm each a weight and a bias of [32, 128] = 4 x 4,096 = 16,384; gate, up, down
    3 x 4096 x 11008 = 135,266,304; two norms 8,192: 202,399,744. 32 layers 6,476,791,808
    + embedding and head 2 x 65,536 x 4,096 = 536,870,912 + final norm 4,096 = 7,013,666,816,
    transformers' count."""
    a = load_arch(str(CONFIGS / "transformers__ChameleonConfig-defaults.json"))
    assert a.params_total == 7_013_666_816
    shapes = {t.name: (t.shape, t.shard) for t in a.layers[0].tensors()}
    assert shapes["q_norm.bias"] == ((4096,), "col") and shapes["k_norm.weight"] == ((4096,), "kv")
    assert any("vq encoder" in n for n in a.notes)
    # the per-head norms split with their heads: at TP 2 a GPU holds half of every parameter
    # but the replicated layer norms (32 x 8,192 + the final 4,096 = 266,240), 2 B each
    one, two = (weights_held_per_stage(a, make_deployment(a, "h100", tp=t))[0] for t in (1, 2))
    assert one == 2 * 7_013_666_816
    assert two == 2 * ((7_013_666_816 - 266_240) / 2 + 266_240)


def test_emu3_is_llama():
    """Emu3Config(): text_config emu3_text_model, Emu3TextModel(LlamaModel): 32 layers, hidden
    4096, 32 heads, 8 KV heads of 128, MLP 14336, vocab 184,622 untied. A layer: q, o
    2 x 16,777,216 + k, v 2 x 4,194,304 + MLP 3 x 4096 x 14336 = 176,160,768 + norms 8,192
    = 218,112,000; 32 layers 6,979,584,000 + 2 x 184,622 x 4,096 = 1,512,423,424 + 4,096
    = 8,492,011,520, transformers' count."""
    a = load_arch(str(CONFIGS / "transformers__Emu3Config-defaults.json"))
    assert a.params_total == 8_492_011_520
    assert a.model_type == "llama" and any("model_type emu3" in n for n in a.notes)
    text = json.loads((CONFIGS / "transformers__Emu3Config-defaults.json").read_text())["text_config"]
    assert text["model_type"] == "emu3_text_model"
