"""Older remote-code decoders vLLM serves on its Llama layers: InternLM v1 (internlm, q/k/v/o
biased by `bias`) and TeleChat / TeleChat2 (telechat, GPT-2 era field names, biases on the
attention output and the MLP's down projection only). BAAI Aquila / Aquila2 (aquila) is Llama
tensor for tensor: a registry.SAME_AS entry. Each builder is `(Fields) -> (layers, mtp, notes)`
and is listed in decodescope.arch.registry.FAMILIES through _lazy."""

from decodescope.arch.blocks import DenseMLP, Layer
from decodescope.arch.build import attention, build_decoder
from decodescope.arch.classic import even_head_dim, vector
from decodescope.arch.families import rename
from decodescope.arch.fields import Fields
from decodescope.errors import DecodescopeError


def _flag(f: Fields, key: str, default: bool) -> bool:
    """A true / false field; anything else is refused (a string "false" would read as true)."""
    v = f.get(key, default=default)
    if not isinstance(v, bool):
        raise DecodescopeError(f"{f.source}: field '{key}' is {str(v)[:40]!r}, expected true or false",
                               f"fix \"{key}\" in the config (see the model's Hugging Face config.json)")
    return v


def build_internlm(f: Fields):
    """InternLM v1 (internlm/internlm-7b, internlm-chat-7b, internlm-20b; InternLMForCausalLM):
    Llama's tensors, with `bias` (InternLMConfig's default true) putting a bias on q, k, v and
    o_proj, none on the MLP. vLLM runs it as LlamaForCausalLM (vllm/model_executor/models/llama.py
    reads config.bias for the attention's qkv_proj and o_proj)."""
    bias = _flag(f, "bias", default=True)
    return build_decoder(Fields({**f.data, "model_type": "llama", "attention_bias": bias,
                                 "attention_out_bias": bias, "mlp_bias": False}, f.source))


def build_telechat(f: Fields):
    """TeleChat (Tele-AI/telechat-7B, 12B) and TeleChat2 (TeleChat2-3B ... 115B), model_type
    telechat: n_layer layers of n_head heads of hidden_size / n_head, num_key_value_heads K/V
    heads (TeleChat v1's TelechatAttention: all heads), a bias-free query and key_value, a biased
    dense (o_proj); a SwiGLU MLP of ffn_hidden_size whose down_proj alone is biased; RMSNorms,
    and with embed_layernorm one on the embedding (word_embeddings_layernorm, read with the first
    layer). vLLM's telechat2.py builds LlamaModel with biases and drops the qkv and gate_up ones.
    TelechatConfig names no tie_word_embeddings: PretrainedConfig's default ties the head
    (telechat-7B's checkpoint holds no lm_head; registry.TIED_BY_DEFAULT)."""
    f = rename(f, {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head",
                   "intermediate_size": "ffn_hidden_size"})
    h, d = f.need("hidden_size"), even_head_dim(f)
    heads = f.need("num_attention_heads")
    attn = attention(f, attention_bias=False, o_bias=True, head_dim=d,
                     num_key_value_heads=f.get("num_key_value_heads", default=heads))
    layer = Layer("attention", attn, DenseMLP(h, f.need("intermediate_size", "the MLP")),
                  (vector("down_proj.bias", h),))
    layers = [layer] * f.need("num_hidden_layers")
    if _flag(f, "embed_layernorm", default=False):
        layers[0] = Layer("attention", attn, layer.mlp, layer.extra + (vector("word_embeddings_layernorm", h),))
    return layers, [], ()
