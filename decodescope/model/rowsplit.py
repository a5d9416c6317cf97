"""llama.cpp's row split (`--split-mode row`; the only multi-GPU mode before January 2024,
when https://github.com/ggml-org/llama.cpp/pull/4766 made the layer split the default).

Each weight matrix is split by rows over the GPUs; the main GPU keeps the KV cache and runs
attention, norms and every other op. Per split matmul (ggml_cuda_op_mul_mat; the scheme is
unchanged since 2023, e.g. https://github.com/ggml-org/llama.cpp/blob/
f6d77a1ba0ac794e950bd3abb630b904bdcd8fb8/ggml/src/ggml-cuda/ggml-cuda.cu): the main GPU records an event that the others wait on,
each other GPU copies the input activations from the main GPU (cudaMemcpyPeerAsync: f32,
or q8_1 when the weights are quantized), multiplies its rows, copies its slice of the f32
output back (cudaMemcpy3DPeerAsync) and records an event the main GPU waits on. One host
thread issues all of it, device after device."""

from dataclasses import replace

from decodescope.arch import MLA, Attention, GatedDeltaNet, Layer, Mamba2, MoE
from decodescope.model.formats import WeightFormat
from decodescope.model.ops import Op, Rates, attention_op, link_time_s, state_op, weight_ops

F32_BYTES = 4  # ggml's activations and matmul outputs
Q8_1_BYTES = 36 / 32  # block_q8_1: 32 int8 values + an fp16 scale and an fp16 sum
OPS_PER_PEER = 3  # per split matmul on each other GPU: input copy, matmul, output copy


def row_split_layer_ops(layer: Layer, fmt: WeightFormat, d, batch: int, tokens_per_req: int, r: Rates) -> list[Op]:
    """One layer under a row split over d.tp GPUs: each GPU reads its rows of every
    weight; the main GPU attends over the whole KV cache (all heads); per split matmul two
    exchanges (input out to the other GPUs, their output slices back), each the link's
    latency plus its bytes through the main GPU's link, and OPS_PER_PEER launches per
    other GPU on the host's critical path."""
    tokens, n = batch * tokens_per_req, d.tp
    moe = layer.mlp if isinstance(layer.mlp, MoE) else None
    ops = weight_ops(layer.tensors(), moe, fmt, d, tokens, r)
    main = replace(d, tp=1)  # the main GPU holds the whole KV cache / state
    if isinstance(layer.mixer, (Attention, MLA)):
        ops.append(attention_op(layer.mixer, main, batch, tokens_per_req, r))
    elif isinstance(layer.mixer, (GatedDeltaNet, Mamba2)):
        ops.append(state_op(layer.mixer, main, batch, tokens_per_req, r))
    split = [t for t in layer.tensors() if t.linear]
    for t in split:
        rows, cols = t.shape  # (out, in)
        fmt_bits = fmt.tensor_format(t, False).bits
        in_bytes = tokens * cols * (Q8_1_BYTES if fmt_bits < 16 else F32_BYTES)
        out_bytes = tokens * rows * F32_BYTES
        wire = (n - 1) * in_bytes + (n - 1) / n * out_bytes  # all through the main GPU's link
        ops.append(Op("allreduce", f"{t.name} row-split exchange", in_bytes + out_bytes, 0.0,
                      link_time_s(r, wire, exchanges=2), "comm"))
    launches = layer.kernels + len(split) * (n - 1) * OPS_PER_PEER
    ops.append(Op("kernels", "kernel floors", 0.0, 0.0, launches * r.kernel_floor_s, "fixed"))
    return ops
