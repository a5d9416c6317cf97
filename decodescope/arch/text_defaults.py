"""The class defaults of transformers' text configs, where a multimodal config nests its language
model (text_config, llm_config, language_config). transformers writes a nested config as a diff
against its class's defaults (PretrainedConfig.to_diff_dict), so a released config may leave out
every field it shares with them: llava-hf/llava-1.5-7b-hf's text_config names only
max_position_embeddings, rms_norm_eps and vocab_size, and transformers fills hidden 4096, 32 layers
and intermediate 11008 from LlamaConfig. build.text_fields fills a field from here only where
neither the nested config nor the wrapper names it.

Source: each class's field defaults in transformers 5.24 (models/<type>/configuration_<type>.py,
the dataclass defaults, not the values __post_init__ derives: a default left None, such as Llama's
num_key_value_heads or head_dim, is derived as the config class derives it)."""

# nested model_type -> {field: the config class's default}
TEXT_DEFAULTS = {
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048},  # LlamaConfig
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072, "sliding_window": 4096},  # MistralConfig
    "mixtral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072, "num_experts_per_tok": 2, "num_local_experts": 8},  # MixtralConfig
    "qwen2": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 32768, "sliding_window": 4096, "use_sliding_window": False},  # Qwen2Config
    "qwen2_moe": {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16, "max_position_embeddings": 32768, "sliding_window": 4096, "use_sliding_window": False, "moe_intermediate_size": 1408, "num_experts": 60, "num_experts_per_tok": 4, "shared_expert_intermediate_size": 5632, "decoder_sparse_step": 1},  # Qwen2MoeConfig
    "qwen3": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 32768, "sliding_window": 4096, "use_sliding_window": False},  # Qwen3Config
    "qwen3_moe": {"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 4, "max_position_embeddings": 32768, "sliding_window": 4096, "use_sliding_window": False, "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "decoder_sparse_step": 1},  # Qwen3MoeConfig
    "gemma": {"vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 256, "max_position_embeddings": 8192},  # GemmaConfig
    "gemma2": {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "max_position_embeddings": 8192, "sliding_window": 4096},  # Gemma2Config
    "phi3": {"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 4096},  # Phi3Config
    "cohere": {"vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528, "num_hidden_layers": 40, "num_attention_heads": 64, "max_position_embeddings": 8192},  # CohereConfig
    "cohere2": {"vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528, "num_hidden_layers": 40, "num_attention_heads": 64, "max_position_embeddings": 8192, "sliding_window": 4096},  # Cohere2Config
    "granite": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32, "max_position_embeddings": 2048},  # GraniteConfig
    "persimmon": {"vocab_size": 262144, "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 36, "num_attention_heads": 64, "max_position_embeddings": 16384},  # PersimmonConfig
    "opt": {"vocab_size": 50272, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "max_position_embeddings": 2048, "ffn_dim": 3072},  # OPTConfig
}
