"""A tiny random-weight Llama as a GGUF file, for a real llama-server in the tests: a
byte-level BPE tokenizer trained on the bundled prompt suites (no download) and random
f32 weights, written with the gguf-py package that ships with the llama.cpp source the
server was built from (so the file format matches the binary).

Usage: python tests/servers/tiny_gguf.py GGUF_PY_DIR OUT.gguf
Sized so one decode step takes milliseconds on a CPU (8 layers, width 512): the server's
own timing of a step is then well above its per-token streaming overhead.
"""

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
LAYERS, WIDTH, FFN, HEADS, KV_HEADS, CONTEXT = 4, 256, 768, 4, 2, 2048
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def train_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    corpus = [
        line
        for s in ("repetitive", "code", "prose")
        for line in (ROOT / f"decodescope/measure/suites/{s}.jsonl").read_text().splitlines()
    ]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    specials = ["<s>", "</s>", "<|im_start|>", "<|im_end|>"]
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    bpe.train_from_iterator(
        corpus, trainers.BpeTrainer(vocab_size=512, special_tokens=specials, initial_alphabet=alphabet)
    )
    return bpe, specials


def write(gguf_py: str, out: Path) -> None:
    sys.path.insert(0, gguf_py)
    import gguf

    bpe, specials = train_tokenizer()
    model = json.loads(bpe.to_str())["model"]
    vocab = sorted(model["vocab"].items(), key=lambda kv: kv[1])
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    w = gguf.GGUFWriter(str(out), "llama")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(WIDTH)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(WIDTH // HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list([t for t, _ in vocab])
    control, normal = gguf.TokenType.CONTROL, gguf.TokenType.NORMAL
    w.add_token_types([control if t in specials else normal for t, _ in vocab])
    w.add_token_merges(merges)
    w.add_bos_token_id(model["vocab"]["<s>"])
    w.add_eos_token_id(model["vocab"]["<|im_end|>"])
    w.add_chat_template(CHATML)
    for name, shape in tensors(len(vocab)):
        w.add_tensor(name, random(shape))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def tensors(n_vocab: int):
    kv = KV_HEADS * WIDTH // HEADS
    yield "token_embd.weight", (n_vocab, WIDTH)
    for i in range(LAYERS):
        b = f"blk.{i}."
        yield b + "attn_norm.weight", (WIDTH,)
        yield b + "attn_q.weight", (WIDTH, WIDTH)
        yield b + "attn_k.weight", (kv, WIDTH)
        yield b + "attn_v.weight", (kv, WIDTH)
        yield b + "attn_output.weight", (WIDTH, WIDTH)
        yield b + "ffn_norm.weight", (WIDTH,)
        yield b + "ffn_gate.weight", (FFN, WIDTH)
        yield b + "ffn_up.weight", (FFN, WIDTH)
        yield b + "ffn_down.weight", (WIDTH, FFN)
    yield "output_norm.weight", (WIDTH,)
    yield "output.weight", (n_vocab, WIDTH)


def random(shape) -> np.ndarray:
    rng = np.random.default_rng(len(shape) * 1000 + shape[0])
    if len(shape) == 1:  # norm weights
        return np.ones(shape, dtype=np.float32)
    return (rng.standard_normal(shape) * 0.05).astype(np.float32)


if __name__ == "__main__":
    write(sys.argv[1], Path(sys.argv[2]))
