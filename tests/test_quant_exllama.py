"""ExLlamaV2 EXL2 / ExLlamaV3 EXL3 checkpoints' quantization_config: the linear layers at the
converter's average bits per weight, the LM head at head_bits, the embedding 16-bit."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model.quant_config import config_format

LLAMA_31_8B = Path(__file__).parents[1] / "decodescope" / "arch" / "presets" / "meta-llama__Llama-3.1-8B.json"
# the quantization_config of bartowski/magnum-12b-v2.5-kto-exl2 (branch 4_25), as a public test quotes
# it byte for byte (the converter's fields: exllamav2/conversion/compile.py writes bits, head_bits, calibration)
EXL2_4_25 = {"quant_method": "exl2", "version": "0.1.8", "bits": 4.25, "head_bits": 6,
             "calibration": {"rows": 115, "length": 2048, "dataset": "(default)"}}


def test_exl2_reads_its_average_bits_and_head_bits(write_config):
    """EXL2 at 4.25 bits on Llama-3.1-8B's shape: 32 layers x (q, o 2 x 16,777,216 + k, v 2 x 4,194,304
    + MLP 3 x 4,096 x 14,336) = 6,979,321,856 linear weights at 4.25 bits = 3,707,764,736 B; the head
    525,336,576 at 6 bits = 394,002,432 B; the embedding (525,336,576) and the norms (32 x 8,192 +
    4,096 = 266,240) at 16 bits = 1,051,205,632 B: 5,152,972,800 B."""
    path = write_config({**json.loads(LLAMA_31_8B.read_text()), "quantization_config": EXL2_4_25})
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", path, "--gpu", "rtx-4090", "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["memory"]["weights_bytes"] == 3_707_764_736 + 394_002_432 + 1_051_205_632 == 5_152_972_800
    # EXL3 reads the same fields; a bit width past 16 is one clear error
    exl3 = load_arch(write_config({**json.loads(LLAMA_31_8B.read_text()),
                                   "quantization_config": {**EXL2_4_25, "quant_method": "exl3"}}))
    fmt = config_format(exl3)
    assert {fmt.tensor_bits(t) for t in exl3.layers[0].tensors() if t.linear} == {4.25}
    assert fmt.tensor_bits(exl3.lm_head) == 6
    with pytest.raises(DecodescopeError, match="head_bits"):
        config_format(load_arch(write_config({**json.loads(LLAMA_31_8B.read_text()),
                                              "quantization_config": {**EXL2_4_25, "head_bits": 32}})))
