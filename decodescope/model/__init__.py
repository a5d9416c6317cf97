"""model: one decode round of a deployment, from first principles."""

from decodescope.arch import Arch
from decodescope.errors import DecodescopeError
from decodescope.hardware import get_gpu, get_interconnect
from decodescope.model.deployment import (Deployment, Spec, check_weights_flag, engine_format, parse_backend,
                                          parse_spec)
from decodescope.model.engines import get_engine
from decodescope.model.formats import WeightFormat, parse_format
from decodescope.model.gguf_weights import gguf_format
from decodescope.model.quant_config import config_format
from decodescope.model.predict import Prediction, predict


def make_deployment(arch: Arch, gpu: str, *, tp: int = 1, pp: int = 1, ep: int = 1, gpus: int | None = None,
                    weights: str | None = None, kv: str | None = None, batch: int = 1, context: int = 1024,
                    spec: str = "none", accept: float | None = None, draft: Arch | None = None,
                    engine: str = "generic", link: str | None = None, same_tokens: bool = False,
                    tree: str | None = None, split_rows: bool = False, backend: str | None = None) -> Deployment:
    """A Deployment from command-line style values; defaults as `decodescope model`."""
    if gpus is not None and gpus != tp * pp:
        raise DecodescopeError(f"--gpus {gpus} is not --tp {tp} x --pp {pp}",
                               "set --tp / --pp so that their product is the GPU count of one replica "
                               "(data-parallel replicas do not change per-user speed)")
    g = get_gpu(gpu)
    if weights and weights.lower().endswith(".gguf"):
        fmt = gguf_format(weights, arch)
    else:
        if weights:
            check_weights_flag(weights)
        fmt = parse_format(weights, arch) if weights else config_format(arch)
    kv_dtype = kv or _config_kv(arch)
    link_id = link or ("none" if tp * pp == 1 else g.link)
    e = get_engine(engine)
    return Deployment(gpu=g, link=get_interconnect(link_id), weights=engine_format(fmt, e), engine=e,
                      tp=tp, pp=pp, ep=ep, kv_dtype=kv_dtype, batch=batch, context=context,
                      spec=parse_spec(spec, accept, tree), draft=draft, same_tokens=same_tokens,
                      split_rows=split_rows, backend=parse_backend(backend))


def _config_kv(arch: Arch) -> str:
    """The checkpoint's KV-cache scheme, else its 16-bit dtype (vLLM's and SGLang's
    kv_cache_dtype "auto": the model's dtype; FP8 checkpoints compute, and cache, in bf16)."""
    scheme = (arch.quantization or {}).get("kv_cache_scheme") or {}
    if scheme.get("num_bits") == 8 and scheme.get("type") == "float":
        return "fp8"
    return "fp16" if arch.dtype == "fp16" else "bf16"


__all__ = ["Deployment", "Spec", "WeightFormat", "Prediction", "predict", "make_deployment",
           "parse_format", "config_format", "parse_spec", "get_engine"]
