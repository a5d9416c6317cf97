"""Microsoft BitNet b1.58 (model_type bitnet): Llama's layers with two sub-layer RMSNorms, and
its ternary weights read from quantization_config (quant_method "bitnet")."""

import json
import subprocess
import sys
from pathlib import Path

from decodescope.arch import load_arch

CONFIGS = Path(__file__).parent / "data" / "configs"
BF16 = CONFIGS / "microsoft__bitnet-b1.58-2B-4T-bf16.json"


def _weights_bytes(path: Path | str) -> float:
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", str(path), "--gpu", "h100", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["memory"]["weights_bytes"]


# By hand, bitnet-b1.58-2B-4T (hidden 2,560, 20 heads of 128, 5 KV heads, MLP 6,912, 30 layers, vocab
# 128,256, tied): q, o 2 x 6,553,600 + k, v 2 x 1,638,400 + gate, up, down 3 x 17,694,720
# = 69,468,160 linear weights a layer; norms a layer: input and post-attention 2 x 2,560,
# attn_sub_norm 2,560, ffn_sub_norm 6,912 = 14,592
LINEAR = 30 * 69_468_160
NORMS = 30 * 14_592 + 2_560  # + the final norm
EMBEDDING = 128_256 * 2_560


def test_bitnet_2b4t_has_the_cards_count_and_both_sub_norms():
    a = load_arch(str(BF16))
    # the model card's "Parameters: 2,412,820,480"
    assert LINEAR + NORMS + EMBEDDING == 2_412_820_480
    assert a.params_total == 2_412_820_480 and a.tie_word_embeddings
    shapes = {t.name: t.shape for t in a.layers[0].tensors()}
    assert shapes["attn_sub_norm"] == (2560,) and shapes["ffn_sub_norm"] == (6912,)


def test_bitnet_class_defaults_equal_transformers():
    # BitNetConfig() leaves the head untied: + 128,256 x 2,560; transformers 5.24 on the meta
    # device counts 2,741,155,840
    a = load_arch(str(CONFIGS / "transformers__BitNetConfig-defaults.json"))
    assert a.params_total == 2_412_820_480 + EMBEDDING == 2_741_155_840


def test_online_reads_16_bits_and_offline_packs_two(write_config):
    # online: the -bf16 checkpoint's masters, ternarized in every forward: 2 bytes a parameter
    # (its one safetensors blob is 4,825,679,400 bytes, this and a 38,440-byte header)
    assert _weights_bytes(BF16) == 2 * 2_412_820_480 == 4_825_640_960
    # offline (microsoft/bitnet-b1.58-2B-4T): four ternary weights a byte; norms and the tied
    # embedding / head stay 16-bit: 521,011,200 + 2 x (441,920 + 328,335,360) = 1,178,562,560 B,
    # the "~1.2 GB" of the packed checkpoint
    cfg = json.loads(BF16.read_text())
    cfg["quantization_config"]["quantization_mode"] = "offline"
    assert _weights_bytes(write_config(cfg)) == LINEAR / 4 + 2 * (NORMS + EMBEDDING) == 1_178_562_560


def test_an_unknown_bitnet_mode_is_one_clear_error(write_config):
    cfg = json.loads(BF16.read_text())
    cfg["quantization_config"]["quantization_mode"] = "dynamic"
    p = write_config(cfg)
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", p, "--gpu", "h100"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "quantization_mode" in r.stderr and "Traceback" not in r.stderr
