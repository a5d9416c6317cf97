"""--weights FILE.gguf: each tensor's bits from the GGUF header, written here by ggml-org's
own gguf package (an implementation independent of decodescope's reader). Only headers are
written: the reader never touches the weights after them."""

import subprocess
import sys

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
Q = gguf.GGMLQuantizationType


def tensor(w, name, shape, t):
    """One tensor's entry in the header: F32 as is, a quantized type in its blocks' bytes."""
    n = int(np.prod(shape))
    if t == Q.F32:
        return w.add_tensor_info(name, shape, np.dtype(np.float32), 4 * n, raw_dtype=t)
    block, size = gguf.GGML_QUANT_SIZES[t]
    w.add_tensor_info(name, (*shape[:-1], shape[-1] // block * size), np.dtype(np.uint8), n // block * size,
                      raw_dtype=t)


def close(w, path):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()  # the header only: no weights after it
    w.close()
    return path


def write_qwen3_moe(path, layers=48, vocab=True):
    """Qwen3-30B-A3B's tensors as llama.cpp names them: experts Q4_K, attention Q8_0,
    router and norms F32, output Q6_K (a dynamic-quant style mix)."""
    w = gguf.GGUFWriter(str(path), "qwen3moe")
    w.add_block_count(layers)  # the hyperparameters llama.cpp's converter writes for Qwen3-30B-A3B
    w.add_context_length(40960)
    w.add_embedding_length(2048)
    w.add_feed_forward_length(6144)
    w.add_head_count(32)
    w.add_head_count_kv(4)
    w.add_key_length(128)
    w.add_value_length(128)
    w.add_expert_count(128)
    w.add_expert_used_count(8)
    w.add_expert_feed_forward_length(768)
    if vocab:  # a real file's vocabulary: 151,936 strings the reader must walk past
        w.add_token_list([f"t{i}" for i in range(151936)])
    tensor(w, "token_embd.weight", (151936, 2048), Q.Q4_K)
    for i in range(layers):
        tensor(w, f"blk.{i}.attn_norm.weight", (2048,), Q.F32)
        for name, shape in (("attn_q", (4096, 2048)), ("attn_k", (512, 2048)), ("attn_v", (512, 2048)),
                            ("attn_output", (2048, 4096))):
            tensor(w, f"blk.{i}.{name}.weight", shape, Q.Q8_0)
        tensor(w, f"blk.{i}.ffn_gate_inp.weight", (128, 2048), Q.F32)
        for name, shape in (("gate", (128, 768, 2048)), ("up", (128, 768, 2048)), ("down", (128, 2048, 768))):
            tensor(w, f"blk.{i}.ffn_{name}_exps.weight", shape, Q.Q4_K)
    tensor(w, "output.weight", (151936, 2048), Q.Q6_K)
    return close(w, path)


def model_json(*args):
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", *args, "--json"], capture_output=True, text=True)
    return r


def test_each_tensor_is_read_at_its_own_bits(tmp_path):
    f = write_qwen3_moe(tmp_path / "Qwen3-30B-A3B-mix.gguf")
    r = model_json("qwen3-30b-a3b", "--gpu", "rtx-4090", "--engine", "llamacpp", "--weights", str(f))
    assert r.returncode == 0, r.stderr
    import json
    out = json.loads(r.stdout)
    # by hand, one token: per layer q, k, v, o (18,874,368 weights) at Q8_0's 34 bytes per 32,
    # 8 of 128 experts (3 x 2048 x 768 each) at Q4_K's 144 bytes per 256, the router
    # (128 x 2048) and the norms (2 x 2048 + q/k norms 2 x 128) in 16 bits; the head
    # (151,936 x 2048) at Q6_K's 210 bytes per 256; the final norm
    layer = 18_874_368 * 34 / 32 + 8 * 3 * 2048 * 768 * 144 / 256 + (128 * 2048 + 2 * 2048 + 2 * 128) * 2
    assert out["weight_bytes_per_gpu"] == pytest.approx(48 * layer + 151936 * 2048 * 210 / 256 + 2048 * 2)
    assert out["deployment"]["weights"]["name"] == "gguf Qwen3-30B-A3B-mix.gguf"


def test_a_file_of_another_model_is_one_clear_error(tmp_path):
    f = write_qwen3_moe(tmp_path / "short.gguf", layers=47, vocab=False)
    r = model_json("qwen3-30b-a3b", "--gpu", "rtx-4090", "--weights", str(f))
    assert r.returncode == 2 and "has 47 blocks" in r.stderr and "Traceback" not in r.stderr
    r = model_json("qwen3-8b", "--gpu", "rtx-4090", "--weights", str(write_qwen3_moe(tmp_path / "moe.gguf", 36, False)))
    assert r.returncode == 2 and "routed experts" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("content", [b"", b"not a gguf at all", b"GGUF\x03\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"])
def test_bad_files_are_one_clear_error(tmp_path, content):
    f = tmp_path / "bad.gguf"
    f.write_bytes(content)
    r = model_json("qwen3-30b-a3b", "--gpu", "rtx-4090", "--weights", str(f))
    assert r.returncode == 2 and r.stderr.startswith("error:") and "Traceback" not in r.stderr


def test_a_truncated_header_is_one_clear_error(tmp_path):
    whole = write_qwen3_moe(tmp_path / "whole.gguf", vocab=False).read_bytes()
    f = tmp_path / "cut.gguf"
    f.write_bytes(whole[: len(whole) // 2])
    r = model_json("qwen3-30b-a3b", "--gpu", "rtx-4090", "--weights", str(f))
    assert r.returncode == 2 and "ends early" in r.stderr


def test_a_split_file_needs_all_its_parts(tmp_path):
    f = write_qwen3_moe(tmp_path / "m-00001-of-00002.gguf", vocab=False)
    r = model_json("qwen3-30b-a3b", "--gpu", "rtx-4090", "--weights", str(f))
    assert r.returncode == 2 and "m-00002-of-00002.gguf is missing" in r.stderr


def test_a_llamacpp_log_naming_a_local_gguf_gives_its_tensor_types(tmp_path):
    # the loader's and the device lines as llama.cpp b3917 prints them (tests/data/startup/
    # llamacpp-b3917-rtx4070.log), naming a GGUF that is on this machine
    f = write_qwen3_moe(tmp_path / "Qwen3-30B-A3B-mix.gguf", vocab=False)
    log = tmp_path / "server.log"
    log.write_text("ggml_cuda_init: found 1 CUDA devices:\n"
                   "  Device 0: NVIDIA GeForce RTX 4090, compute capability 8.9, VMM: yes\n"
                   f"llama_model_loader: loaded meta data with 3 key-value pairs and 434 tensors from {f} "
                   "(version GGUF V3 (latest))\n"
                   "llm_load_print_meta: model ftype      = Q4_K - Medium\n")
    import json
    from_log = model_json("qwen3-30b-a3b", "--from-log", str(log))
    typed = model_json("qwen3-30b-a3b", "--gpu", "rtx-4090", "--engine", "llamacpp", "--weights", str(f))
    assert from_log.returncode == 0, from_log.stderr
    assert json.loads(from_log.stdout) == json.loads(typed.stdout)
    # the same log on a machine without the file falls back to the file type it names
    f.unlink()
    fallback = model_json("qwen3-30b-a3b", "--from-log", str(log))
    assert json.loads(fallback.stdout)["deployment"]["weights"]["name"] == "q4_k_m"


def write_llama(path, layers=32, tied=False):
    """Llama-3.1-8B's tensors and hyperparameters as llama.cpp's converter writes them
    (hidden 4096, 32 heads, 8 KV heads, MLP 14336, 128,256 tokens), Q4_K and a Q6_K head."""
    w = gguf.GGUFWriter(str(path), "llama")
    for add, value in ((w.add_block_count, layers), (w.add_context_length, 131072), (w.add_embedding_length, 4096),
                       (w.add_feed_forward_length, 14336), (w.add_head_count, 32), (w.add_head_count_kv, 8)):
        add(value)
    tensor(w, "token_embd.weight", (128256, 4096), Q.Q4_K)
    for i in range(layers):
        for name, shape in (("attn_q", (4096, 4096)), ("attn_k", (1024, 4096)), ("attn_v", (1024, 4096)),
                            ("attn_output", (4096, 4096)), ("ffn_gate", (14336, 4096)), ("ffn_up", (14336, 4096)),
                            ("ffn_down", (4096, 14336))):
            tensor(w, f"blk.{i}.{name}.weight", shape, Q.Q4_K)
    if not tied:
        tensor(w, "output.weight", (128256, 4096), Q.Q6_K)
    return close(w, path)


def write_qwen36_moe(path):
    """Qwen3.6-35B-A3B's header as convert_hf_to_gguf.py writes it from the config (Qwen3NextModel:
    ssm.conv_kernel = linear_conv_kernel_dim 4, ssm.state_size = linear_key_head_dim 128,
    ssm.group_count = linear_num_key_heads 16, ssm.time_step_rank = linear_num_value_heads 32,
    ssm.inner_size = 128 x 32); 40 layers + 1 next-token layer in block_count."""
    w = gguf.GGUFWriter(str(path), "qwen35moe")
    for add, value in ((w.add_block_count, 41), (w.add_nextn_predict_layers, 1), (w.add_embedding_length, 2048),
                       (w.add_head_count, 16), (w.add_head_count_kv, 2), (w.add_key_length, 256),
                       (w.add_value_length, 256), (w.add_expert_count, 256), (w.add_expert_used_count, 8),
                       (w.add_expert_feed_forward_length, 512), (w.add_expert_shared_feed_forward_length, 512),
                       (w.add_ssm_conv_kernel, 4), (w.add_ssm_state_size, 128), (w.add_ssm_group_count, 16),
                       (w.add_ssm_time_step_rank, 32), (w.add_ssm_inner_size, 4096), (w.add_full_attention_interval, 4)):
        add(value)
    tensor(w, "token_embd.weight", (248320, 2048), Q.Q4_K)
    for i in range(41):  # blk.40: the next-token layer
        tensor(w, f"blk.{i}.ffn_gate_shexp.weight", (512, 2048), Q.Q8_0)
        for name, shape in (("gate", (256, 512, 2048)), ("up", (256, 512, 2048)), ("down", (256, 2048, 512))):
            tensor(w, f"blk.{i}.ffn_{name}_exps.weight", shape, Q.Q4_K)
    tensor(w, "output.weight", (248320, 2048), Q.Q6_K)
    return close(w, path)


@pytest.mark.parametrize("write, preset", [(write_llama, "llama-3.1-8b"), (write_qwen3_moe, "qwen3-30b-a3b"),
                                           (write_qwen36_moe, "qwen3.6-35b-a3b")])
def test_a_gguf_file_is_a_model_of_its_own(tmp_path, write, preset):
    """The layout from the header alone gives the preset's (its config.json's) counts, and the
    weights are the file's own tensor types."""
    import json
    f = write(tmp_path / "model.gguf")
    alone = model_json(str(f), "--gpu", "rtx-4090", "--engine", "llamacpp")
    assert alone.returncode == 0, alone.stderr
    with_config = model_json(preset, "--gpu", "rtx-4090", "--engine", "llamacpp", "--weights", str(f))
    a, b = json.loads(alone.stdout), json.loads(with_config.stdout)
    for key in ("params_total", "params_active", "weight_bytes_per_gpu"):
        assert a[key] == pytest.approx(b[key]), key
    assert a["expected"]["tok_s"] == pytest.approx(b["expected"]["tok_s"])


def test_llama_3_1_8b_from_its_header_by_hand(tmp_path):
    import json
    out = json.loads(model_json(str(write_llama(tmp_path / "l.gguf")), "--gpu", "rtx-4090").stdout)
    # 32 layers x (q 4096^2 + k, v 1024 x 4096 + o 4096^2 + MLP 3 x 4096 x 14336 + 2 norms of 4096)
    # + embedding and head 128,256 x 4096 + final norm: 8,030,261,248 (Meta's 8.03 B)
    assert out["params_total"] == 8_030_261_248
    r = model_json(str(write_llama(tmp_path / "t.gguf", tied=True)), "--gpu", "rtx-4090")
    assert json.loads(r.stdout)["params_total"] == 8_030_261_248 - 128256 * 4096  # one shared table


def test_an_architecture_it_cannot_lay_out_asks_for_the_config(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "g.gguf"), "gemma3")
    w.add_block_count(2)
    close(w, tmp_path / "g.gguf")
    r = model_json(str(tmp_path / "g.gguf"), "--gpu", "rtx-4090")
    assert r.returncode == 2 and "'gemma3'" in r.stderr and "--weights g.gguf" in r.stderr and "Traceback" not in r.stderr


def test_a_header_with_a_zero_width_is_one_clear_error(tmp_path):
    w = gguf.GGUFWriter(str(tmp_path / "z.gguf"), "llama")
    for add, value in ((w.add_block_count, 1), (w.add_embedding_length, 0), (w.add_head_count, 1)):
        add(value)
    tensor(w, "token_embd.weight", (32, 32), Q.Q8_0)
    r = model_json(str(close(w, tmp_path / "z.gguf")), "--gpu", "rtx-4090")
    assert r.returncode == 2 and "no positive llama.embedding_length" in r.stderr and "Traceback" not in r.stderr


def test_a_pipe_named_gguf_is_refused_not_waited_on(tmp_path):
    import os
    os.mkfifo(tmp_path / "p.gguf")
    r = subprocess.run([sys.executable, "-m", "decodescope", "model", "qwen3-8b", "--gpu", "rtx-4090",
                        "--weights", str(tmp_path / "p.gguf")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not a regular file" in r.stderr
