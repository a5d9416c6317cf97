"""A GGUF file as the model: the config.json fields its header holds, for the llama.cpp
architectures whose layout needs no more (`decodescope model FILE.gguf`). Its weights are
the file's own tensor types (quantization_config quant_method "gguf", model/gguf_weights.py).
Key names: llama.cpp's gguf-py (https://github.com/ggml-org/llama.cpp/blob/master/gguf-py/gguf/constants.py,
class Keys.LLM / Keys.Attention)."""

from pathlib import Path

from decodescope.arch.gguf_header import read_gguf_files
from decodescope.errors import DecodescopeError

# general.architecture -> transformers model_type; other architectures need their config.json
MODEL_TYPES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "qwen3moe": "qwen3_moe",
               "qwen3next": "qwen3_next", "qwen35": "qwen3_5", "qwen35moe": "qwen3_5_moe"}
HYBRIDS = ("qwen3next", "qwen35", "qwen35moe")  # Gated DeltaNet layers between full-attention ones
# config.json field <- GGUF key under the architecture's prefix
FIELDS = {"num_hidden_layers": "block_count", "hidden_size": "embedding_length",
          "intermediate_size": "feed_forward_length", "num_attention_heads": "attention.head_count",
          "num_key_value_heads": "attention.head_count_kv", "head_dim": "attention.key_length",
          "max_position_embeddings": "context_length", "num_experts": "expert_count",
          "num_experts_per_tok": "expert_used_count", "moe_intermediate_size": "expert_feed_forward_length",
          "shared_expert_intermediate_size": "expert_shared_feed_forward_length",
          # Gated DeltaNet, as convert_hf_to_gguf.py's Qwen3NextModel writes it: conv kernel,
          # key head dim (state size), key heads (groups), value heads (time-step rank)
          "linear_conv_kernel_dim": "ssm.conv_kernel", "linear_key_head_dim": "ssm.state_size",
          "linear_num_key_heads": "ssm.group_count", "linear_num_value_heads": "ssm.time_step_rank",
          "full_attention_interval": "full_attention_interval", "mtp_num_hidden_layers": "nextn_predict_layers"}


def gguf_config(path: str) -> tuple[dict, str]:
    """(the config.json fields, a display name) of a GGUF file."""
    meta, tensors = read_gguf_files(path)
    arch = meta.get("general.architecture")
    if arch not in MODEL_TYPES:
        raise DecodescopeError(f"{path}: GGUF architecture {arch!r}: decodescope reads the layout of "
                               f"{', '.join(MODEL_TYPES)} from a GGUF header only",
                               f"pass the model's config.json as MODEL and the file as --weights {Path(path).name}")
    data = {key: v for key, k in FIELDS.items()
            if isinstance(v := meta.get(f"{arch}.{k}"), int) and not isinstance(v, bool) and v > 0}
    for key in ("num_hidden_layers", "hidden_size", "num_attention_heads"):
        if key not in data:
            raise DecodescopeError(f"{path}: the GGUF header has no positive {arch}.{FIELDS[key]}",
                                   "pass the model's config.json")
    names = {t.name: t.weights for t in tensors}
    if "token_embd.weight" not in names:
        raise DecodescopeError(f"{path}: the GGUF holds no token_embd.weight", "pass the model's config.json")
    data |= {"model_type": MODEL_TYPES[arch], "architectures": [f"gguf:{arch}"],
             "vocab_size": names["token_embd.weight"] // data["hidden_size"],
             "tie_word_embeddings": "output.weight" not in names,  # llama.cpp then reads the embedding
             "torch_dtype": "bfloat16",
             "quantization_config": {"quant_method": "gguf", "file": path}}
    if arch in HYBRIDS:
        _hybrid(data, meta, arch, path)
    if arch == "llama":  # Qwen2 has its q/k/v biases whatever the config says
        data["attention_bias"] = "blk.0.attn_q.bias" in names
    return data, Path(path).name.removesuffix(".gguf")


def _hybrid(data: dict, meta: dict, arch: str, path: str) -> None:
    """The value head dim (inner size / value heads), the layers without the next-token ones
    (block_count counts them), and llama.cpp's default pattern of one full-attention layer in 4."""
    inner, heads = meta.get(f"{arch}.ssm.inner_size"), data.get("linear_num_value_heads")
    if not (isinstance(inner, int) and heads):
        raise DecodescopeError(f"{path}: the GGUF header has no {arch}.ssm.inner_size / ssm.time_step_rank",
                               "pass the model's config.json")
    data["linear_value_head_dim"] = inner // heads
    data["num_hidden_layers"] -= data.setdefault("mtp_num_hidden_layers", 0)
    data.setdefault("full_attention_interval", 4)  # llama.cpp's qwen35moe.cpp default
