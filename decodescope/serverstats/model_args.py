"""A log's settings as `decodescope model` arguments (`model --from-log`).

Only what the log states becomes an argument; explicit flags on the command line override
these. A setting the model has no value for (a GPTQ checkpoint whose group size the log does
not say, a q4_0 GGUF, a q8_0 KV cache, Medusa) is left out: `model` then reads the checkpoint's
own config, as it does without a log."""

from pathlib import Path

from decodescope.serverstats.settings import Settings, SpecMethod

# llama.cpp file types (print_info: file type) -> decodescope weight formats
_GGUF = {"q4_k - medium": "q4_k_m", "q5_k - medium": "q5_k_m", "q6_k": "q6_k", "q8_0": "q8_0"}
_QUANT = {"fp8": "fp8", "fbgemm_fp8": "fp8", "modelopt_fp4": "nvfp4", "nvfp4": "nvfp4", "mxfp4": "mxfp4",
          "w8a8_int8": "int8"}
_SPEC = {SpecMethod.MTP: "mtp", SpecMethod.EAGLE: "eagle", SpecMethod.EAGLE3: "eagle",
         SpecMethod.DRAFT: "draft", SpecMethod.NGRAM: "ngram"}


def model_args(s: Settings) -> dict[str, object]:
    """{model, gpu, tp, pp, ep, weights, kv, spec, engine}: the keys the log states, as `model` takes them."""
    out = {"model": s.model, "gpu": _gpu(s.gpus), "tp": s.tp, "pp": s.pp, "ep": s.ep, "weights": _weights(s),
           "kv": _kv(s.kv_cache_dtype), "spec": _spec(s), "engine": s.engine}
    return {k: v for k, v in out.items() if v is not None}


def _gpu(names: tuple[str, ...] | None) -> str | None:
    """The GPU database id of the devices the log names (llama.cpp's ggml_cuda_init list),
    when they all are one GPU the database knows; None otherwise (mixed or unknown cards)."""
    from decodescope.errors import DecodescopeError
    from decodescope.hardware import get_gpu

    ids = set()
    for name in names or ():
        try:
            ids.add(get_gpu(name).id)
        except DecodescopeError:
            return None
    return ids.pop() if len(ids) == 1 else None


def _weights(s: Settings) -> str | None:
    if s.engine == "llamacpp" and s.model and s.model.lower().endswith(".gguf") and Path(s.model).is_file():
        return s.model  # the GGUF the server loaded, on this machine: each tensor's own type
    if s.quantization:
        q = s.quantization.lower()
        return _GGUF.get(q) or _QUANT.get(q)
    return s.dtype if s.dtype in ("bf16", "fp16") else None


def _kv(kv: str | None) -> str | None:
    if kv is None:
        return None
    if kv.startswith("fp8"):
        return "fp8"
    return kv if kv in ("bf16", "fp16") else None


def _spec(s: Settings) -> str | None:
    if s.spec_method is SpecMethod.NONE:
        return "none"
    if s.spec_method in _SPEC and s.spec_steps:
        return f"{_SPEC[s.spec_method]}:{s.spec_steps}"
    return None
