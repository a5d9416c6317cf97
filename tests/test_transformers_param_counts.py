"""decodescope's parameter count of every decoder config class of the installed transformers,
on its defaults, against transformers' own model of it built on the meta device (an
independent count: transformers' modeling code, not ours). Within 1 %, the bar a family's
count must meet; most are exact. Where decodescope counts more, a router's correction bias
is the known cause: a persistent buffer, which the checkpoint holds and transformers does
not count as a parameter. Vision, audio and projector towers are not decode weights:
decodescope counts the language model, so a multimodal class is compared on its language
model (the first of these three readings of transformers' count within 1 % passes)."""

import json
import warnings

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError

torch = pytest.importorskip("torch")
auto_config = pytest.importorskip("transformers.models.auto.configuration_auto")
auto_model = pytest.importorskip("transformers.models.auto.modeling_auto")
transformers = pytest.importorskip("transformers")

# classes transformers counted wrong before a release (the version that fixed it, why)
TRANSFORMERS_FIXED = {
    # LongCat-Flash (560B published): 5.24 allocated expert weights for its 256 zero-computation
    # (identity) experts too, 768 x 28 where the checkpoint holds 512 x 28: 741,053,585,408;
    # 5.25 builds the 512
    "longcat_flash": ((5, 25), "identity experts given weights"),
}
# name parts of the towers a decode pass does not run
TOWERS = ("vision", "visual", "audio", "image", "connector", "projector", "perceiver", "patch", "embed_tokens_extend")


def _readings(model) -> list[int]:
    """transformers' count three ways: every parameter; the language model and its head;
    every parameter outside the modality towers."""
    named = [(n, p.numel()) for n, p in model.named_parameters()]
    text = sum(x for n, x in named if "language_model" in n or "text_model" in n or n.split(".")[-2:-1] == ["lm_head"]
               or n.startswith("lm_head"))
    rest = sum(x for n, x in named if not any(t in part for part in n.split(".") for t in TOWERS))
    return [sum(x for _, x in named), text, rest]


def _transformers_model(model_type: str, config):
    causal = model_type in auto_model.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    auto = transformers.AutoModelForCausalLM if causal else transformers.AutoModelForImageTextToText
    with torch.device("meta"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return auto.from_config(config)


def test_counts_of_every_decoder_config_class_match_transformers(tmp_path):
    types = sorted(set(auto_model.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES) | set(auto_model.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES))
    compared, off = 0, []
    for model_type in types:
        try:
            config = auto_config.CONFIG_MAPPING[model_type]()
            path = tmp_path / f"{model_type}.json"
            path.write_text(json.dumps(config.to_dict(), default=str))
        except Exception:  # a class that cannot stand on its defaults: nothing to compare
            continue
        try:
            ours = load_arch(str(path)).params_total
        except DecodescopeError:  # refused with a clear error: the sweep test's subject
            continue
        try:
            readings = _readings(_transformers_model(model_type, config))
        except Exception:  # noqa: BLE001 - transformers cannot build it on the meta device: no reference
            continue
        fixed = TRANSFORMERS_FIXED.get(model_type)
        if fixed and tuple(int(x) for x in transformers.__version__.split(".")[:2]) < fixed[0]:
            continue
        compared += 1
        if not any(r and abs(ours / r - 1) <= 0.01 for r in readings):
            off.append(f"{model_type}: decodescope {ours:,}, transformers {readings[0]:,} (language model {readings[1]:,})")
    assert not off, off
    assert compared >= 150, compared  # transformers 5.24 / 5.25: 211 compared
