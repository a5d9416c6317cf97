#!/usr/bin/env python3
"""One-shot GPU check for decodescope: what this GPU does for batch-1 decode.

Measures, on the first visible CUDA device (torch + stdlib only, no downloads):

  probe      read-only `nvidia-smi -q`, `nvidia-smi topo -m`, an `nvidia-smi --query-gpu`
             CSV (PCIe gen/width current vs max, clocks, power) and torch/CUDA versions
             -> probe.txt (and a digest in results.json)
  bandwidth  achievable HBM bandwidth: device-to-device copy of a 4 GiB buffer
             (bytes read + written / time) and pure reads (x.sum(), x.amax()), GB/s (1e9)
  matmul     bf16 8192x8192x8192 TFLOP/s, and fp8 e4m3 via torch._scaled_mm where the
             device and torch support it (skipped cleanly otherwise)
  launch     launch latency of a tiny kernel: 10,000 eager launches back to back, and the
             same kernels replayed from a CUDA graph; plus one graph launch
  gemv       batch-1 [1,K]x[K,N] bf16 at decode shapes, eager and 100 calls in a CUDA
             graph; us per call and weight GB/s (weights rotated so L2 never holds them)
  decode     batch-1 decode loop of Llama-3.1-8B and Qwen3-8B shapes built from a config
             dict with random bf16 weights, KV cache prefilled (random) to context 1024,
             200 timed steps after 20 warm-up: eager, CUDA graph, and batch 16 CUDA graph;
             ms/step, tok/s, weight bytes/step and weight GB/s
  trace      torch.profiler Chrome traces (CPU+CUDA) of a few Llama-3.1-8B decode steps,
             each wrapped in record_function("decode_step"): eager and CUDA-graph replay
             -> trace_eager.json.gz, trace_graph.json.gz

Everything goes under --out DIR (default $OUT, else ./gpu_check_out): probe.txt,
results.json (rewritten after every section, so a crash or kill keeps what finished)
and the traces. A compact summary table is printed at the end.

Run:
    python benchmarks/gpu_check.py --out DIR          # on the GPU box (< 4 min on an H200)
    python benchmarks/gpu_check.py --cpu-smoke --out DIR   # tiny sizes on CPU, tests every path
    options: --only decode,trace   --budget-s 200   --hard-limit-s 230

It changes no GPU setting: nvidia-smi is only queried (no -pl/-ac/-r/-lgc, no clock or
power changes, no reset); peak GPU memory stays well under 60 GB.

Exit status: 0 done (sections may still report errors in results.json); 3 torch is not
importable, or has no CUDA and --cpu-smoke was not given.
"""

from __future__ import annotations

import argparse
import faulthandler
import gzip
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import traceback

T0 = time.perf_counter()  # the time budget counts the torch import and CUDA start too

try:
    import torch
    import torch.nn.functional as F

    _TORCH_ERROR = None
except Exception as _exc:  # noqa: BLE001 - any import failure means "no usable torch"
    torch = None
    F = None
    _TORCH_ERROR = _exc

GiB = 1 << 30
MiB = 1 << 20


def log(msg: str) -> None:
    print(f"[gpu_check {time.perf_counter() - T0:6.1f}s] {msg}", flush=True)


# --------------------------------------------------------------------------- sizes

LLAMA31_8B = dict(
    name="llama-3.1-8b", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
    num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=128256,
    rope_theta=500000.0, rms_norm_eps=1e-5, qk_norm=False,
)
QWEN3_8B = dict(
    name="qwen3-8b", hidden_size=4096, intermediate_size=12288, num_hidden_layers=36,
    num_attention_heads=32, num_key_value_heads=8, head_dim=128, vocab_size=151936,
    rope_theta=1000000.0, rms_norm_eps=1e-6, qk_norm=True,  # Qwen3 has per-head q/k RMSNorm
)


class Sizes:
    def __init__(self, smoke: bool):
        self.smoke = smoke
        if not smoke:
            self.bw_bytes = 4 * GiB
            self.bw_reps, self.bw_warmup = 20, 3
            self.mm_n, self.mm_reps, self.mm_warmup = 8192, 20, 3
            self.launch_n, self.launch_graph_nodes = 10000, 1000
            self.gemv_shapes = [(4096, 4096), (4096, 14336), (14336, 4096), (5120, 17408), (4096, 128256)]
            self.gemv_calls, self.gemv_reps = 100, 7
            self.gemv_min_rotation_bytes = 512 * MiB  # >> 50 MB L2 of an H100/H200
            self.configs = [LLAMA31_8B, QWEN3_8B]
            self.ctx, self.steps, self.warmup = 1024, 200, 20
            self.big_batch = 16
            self.trace_steps = 5
        else:
            self.bw_bytes = 64 * MiB
            self.bw_reps, self.bw_warmup = 5, 1
            self.mm_n, self.mm_reps, self.mm_warmup = 256, 5, 1
            self.launch_n, self.launch_graph_nodes = 2000, 100
            self.gemv_shapes = [(256, 256), (256, 896), (896, 256), (320, 1088), (256, 8016)]
            self.gemv_calls, self.gemv_reps = 20, 3
            self.gemv_min_rotation_bytes = 4 * MiB
            self.configs = [
                dict(LLAMA31_8B, name="llama-3.1-8b(smoke-scaled)", hidden_size=256,
                     intermediate_size=896, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=64, vocab_size=2048),
                dict(QWEN3_8B, name="qwen3-8b(smoke-scaled)", hidden_size=256,
                     intermediate_size=768, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, head_dim=64, vocab_size=2304),
            ]
            self.ctx, self.steps, self.warmup = 64, 20, 5
            self.big_batch = 16
            self.trace_steps = 3


# --------------------------------------------------------------------------- helpers


class Clock:
    """CUDA events on a GPU (read after one synchronize), perf_counter on CPU."""

    def __init__(self, cuda: bool):
        self.cuda = cuda

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def ms(self, a, b) -> float:
        if self.cuda:
            return a.elapsed_time(b)
        return (b - a) * 1e3

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def rnd(x, nd=4):
    if x is None:
        return None
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    return round(float(x), nd)


def stats_ms(xs: list[float]) -> dict:
    xs = sorted(xs)
    n = len(xs)
    if n == 0:
        return {}
    return {
        "n": n,
        "median_ms": rnd(statistics.median(xs), 5),
        "mean_ms": rnd(statistics.fmean(xs), 5),
        "min_ms": rnd(xs[0], 5),
        "p10_ms": rnd(xs[int(0.1 * (n - 1))], 5),
        "p90_ms": rnd(xs[int(0.9 * (n - 1))], 5),
    }


def time_reps(clock: Clock, fn, reps: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    clock.sync()
    marks = []
    for _ in range(reps):
        a = clock.mark()
        fn()
        b = clock.mark()
        marks.append((a, b))
    clock.sync()
    return [clock.ms(a, b) for a, b in marks]


def capture_graph(fn, warm: int = 3):
    """Warm fn up on a side stream (as the CUDA-graph docs ask), then capture one call."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def free_memory(cuda: bool) -> None:
    import gc

    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()


def run_cmd(cmd: list[str], timeout: float = 30.0) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out = p.stdout
        if p.stderr.strip():
            out += "\n[stderr]\n" + p.stderr
        if p.returncode != 0:
            out += f"\n[exit status {p.returncode}]"
        return out
    except FileNotFoundError:
        return f"[{cmd[0]} not found]"
    except subprocess.TimeoutExpired:
        return f"[timed out after {timeout}s]"
    except Exception as exc:  # noqa: BLE001
        return f"[failed: {exc!r}]"


# --------------------------------------------------------------------------- model


class DecodeModel:
    """Llama-style decoder from an HF-like config dict, random weights, static KV cache.

    step_eager(ids, pos): attention over the cache sliced to pos+1 (shapes change per step).
    step_static():        reads/advances the static ids/pos tensors, attends over the whole
                          preallocated cache with an additive mask (fixed shapes: capturable).
    GQA: q is viewed as [B, kv_heads, heads_per_kv, head_dim] so each kv head serves its
    query group without repeating the cache (exact for a one-token query).
    """

    def __init__(self, cfg: dict, device, dtype, max_len: int):
        self.cfg = cfg
        self.device, self.dtype = device, dtype
        H = cfg["hidden_size"]
        inter = cfg["intermediate_size"]
        self.nh, self.nkv, self.hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        self.group = self.nh // self.nkv
        self.H, self.V, self.eps = H, cfg["vocab_size"], cfg.get("rms_norm_eps", 1e-5)
        self.max_len = max_len
        self.qk_norm = bool(cfg.get("qk_norm", False))

        def w(*shape):
            return torch.randn(*shape, device=device, dtype=dtype).mul_(0.02)

        def ones(n):
            return torch.ones(n, device=device, dtype=dtype)

        self.embed = w(self.V, H)
        self.layers = []
        for _ in range(cfg["num_hidden_layers"]):
            L = {
                "in_norm": ones(H),
                "qkv": w((self.nh + 2 * self.nkv) * self.hd, H),
                "o": w(H, self.nh * self.hd),
                "post_norm": ones(H),
                "gate_up": w(2 * inter, H),
                "down": w(H, inter),
            }
            if self.qk_norm:
                L["q_norm"] = ones(self.hd)
                L["k_norm"] = ones(self.hd)
            self.layers.append(L)
        self.final_norm = ones(H)
        self.lm_head = w(self.V, H)

        theta = float(cfg.get("rope_theta", 10000.0))
        inv = 1.0 / (theta ** (torch.arange(0, self.hd, 2, device=device, dtype=torch.float32) / self.hd))
        ang = torch.outer(torch.arange(max_len, device=device, dtype=torch.float32), inv)
        self.cos, self.sin = ang.cos().to(dtype), ang.sin().to(dtype)  # [max_len, hd/2]
        self.arange_L = torch.arange(max_len, device=device)
        self.zeros_L = torch.zeros(max_len, device=device, dtype=dtype)
        self.batch = 0
        self.kv = None

    # -- sizes
    def weight_bytes(self) -> int:
        n = self.final_norm.numel() + self.lm_head.numel()
        for L in self.layers:
            n += sum(t.numel() for t in L.values())
        return n * self.lm_head.element_size()

    def kv_bytes_read(self, length: int) -> int:
        """K+V bytes one step reads at attention length `length`, for the current batch."""
        return 2 * len(self.layers) * self.batch * self.nkv * length * self.hd * self.lm_head.element_size()

    def alloc_cache(self, batch: int) -> None:
        self.kv = None
        self.batch = batch
        # [layers, k/v, B, kv_heads, max_len, head_dim], random: "prefilled" to any context
        self.kv = torch.randn(len(self.layers), 2, batch, self.nkv, self.max_len, self.hd,
                              device=self.device, dtype=self.dtype)
        self.ids = torch.zeros(batch, device=self.device, dtype=torch.long)
        self.pos = torch.zeros(1, device=self.device, dtype=torch.long)

    # -- ops
    def rms(self, x, w):
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (x.shape[-1],), w, self.eps)
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * w

    @staticmethod
    def rope(x, cos, sin):
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)

    def forward(self, ids, pos_int=None, pos_t=None):
        """ids [B] -> logits [B, V]. Eager: pos_int (python int). Static: pos_t ([1] tensor)."""
        B, nh, nkv, hd, G = ids.shape[0], self.nh, self.nkv, self.hd, self.group
        static = pos_t is not None
        x = F.embedding(ids, self.embed).unsqueeze(1)  # [B, 1, H]
        if static:
            cos = self.cos.index_select(0, pos_t).view(1, 1, 1, -1)
            sin = self.sin.index_select(0, pos_t).view(1, 1, 1, -1)
            mask = self.zeros_L.masked_fill(self.arange_L > pos_t, float("-inf")).view(1, 1, 1, -1)
        else:
            cos = self.cos[pos_int].view(1, 1, 1, -1)
            sin = self.sin[pos_int].view(1, 1, 1, -1)
            mask = None
        for li, L in enumerate(self.layers):
            h = self.rms(x, L["in_norm"])
            qkv = F.linear(h, L["qkv"])  # [B, 1, (nh + 2 nkv) hd]
            q, k, v = qkv.split([nh * hd, nkv * hd, nkv * hd], dim=-1)
            q = q.reshape(B, nkv, G, hd)  # query group of each kv head as the "sequence"
            k = k.reshape(B, nkv, 1, hd)
            v = v.reshape(B, nkv, 1, hd)
            if self.qk_norm:
                q = self.rms(q, L["q_norm"])
                k = self.rms(k, L["k_norm"])
            q = self.rope(q, cos, sin)
            k = self.rope(k, cos, sin)
            kc, vc = self.kv[li, 0], self.kv[li, 1]  # [B, nkv, max_len, hd]
            if static:
                kc.index_copy_(2, pos_t, k)
                vc.index_copy_(2, pos_t, v)
                a = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)
            else:
                kc[:, :, pos_int].copy_(k[:, :, 0])
                vc[:, :, pos_int].copy_(v[:, :, 0])
                a = F.scaled_dot_product_attention(q, kc[:, :, : pos_int + 1], vc[:, :, : pos_int + 1])
            x = x + F.linear(a.reshape(B, 1, nh * hd), L["o"])
            h = self.rms(x, L["post_norm"])
            gate, up = F.linear(h, L["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, L["down"])
        x = self.rms(x, self.final_norm)
        return F.linear(x, self.lm_head).view(B, self.V)

    def step_eager(self, ids, pos: int):
        logits = self.forward(ids, pos_int=pos)
        return logits, logits.argmax(-1)

    def step_static(self):
        logits = self.forward(self.ids, pos_t=self.pos)
        self.ids.copy_(logits.argmax(-1))
        self.pos.add_(1)
        self.last_logits = logits
        return logits


# --------------------------------------------------------------------------- sections


class Check:
    def __init__(self, args, sizes: Sizes, cuda: bool):
        self.args = args
        self.sz = sizes
        self.cuda = cuda
        self.device = torch.device("cuda" if cuda else "cpu")
        self.dtype = torch.bfloat16
        self.clock = Clock(cuda)
        self.out = args.out
        self.results = {
            "tool": "decodescope benchmarks/gpu_check.py",
            "mode": "cpu-smoke" if sizes.smoke else "cuda",
            "started_unix": time.time(),
            "units": "GB = 1e9 bytes; TFLOP/s = 1e12; ms/us wall per step or call",
            "sections": {},
        }
        self.deadline = T0 + args.budget_s

    # -- bookkeeping
    def save(self) -> None:
        self.results["elapsed_s"] = rnd(time.perf_counter() - T0, 2)
        path = os.path.join(self.out, "results.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.results, f, indent=1)
        os.replace(tmp, path)

    def no_cuda(self, what: str) -> str:
        return f"skipped: no CUDA ({what})"

    def over_budget(self) -> bool:
        return time.perf_counter() > self.deadline

    def section(self, name: str, fn) -> None:
        if self.args.only and name not in self.args.only:
            return
        res = self.results["sections"].setdefault(name, {})
        if self.over_budget():
            res["status"] = f"skipped: time budget ({self.args.budget_s}s) spent"
            log(f"{name}: {res['status']}")
            self.save()
            return
        log(f"{name}: start")
        t = time.perf_counter()
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
        try:
            fn(res)
            res.setdefault("status", "ok")
        except Exception as exc:  # noqa: BLE001 - a failing section must not lose the others
            res["status"] = f"error: {type(exc).__name__}: {exc}"[:500]
            res["traceback"] = traceback.format_exc()[-4000:]
            log(f"{name}: ERROR {type(exc).__name__}: {exc}")
        finally:
            try:
                free_memory(self.cuda)
            except Exception:  # noqa: BLE001
                pass
        res["section_s"] = rnd(time.perf_counter() - t, 2)
        if self.cuda:
            res["peak_gpu_mem_gb"] = rnd(torch.cuda.max_memory_reserved() / 1e9, 2)
        log(f"{name}: {res['status']} ({res['section_s']}s)")
        self.save()

    # -- 1. probe
    def probe(self, res: dict) -> None:
        lines = []
        info = {
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "torch": torch.__version__,
            "torch_cuda": getattr(torch.version, "cuda", None),
            "cuda_available": torch.cuda.is_available(),
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }
        try:
            info["cudnn"] = torch.backends.cudnn.version()
        except Exception:  # noqa: BLE001
            info["cudnn"] = None
        if self.cuda:
            p = torch.cuda.get_device_properties(0)
            info.update(
                device_count=torch.cuda.device_count(),
                device_name=p.name,
                capability=f"{p.major}.{p.minor}",
                total_memory_gb=rnd(p.total_memory / 1e9, 2),
                multiprocessors=p.multi_processor_count,
            )
            for attr in ("L2_cache_size", "memory_clock_rate", "memory_bus_width"):
                if hasattr(p, attr):
                    info[attr] = getattr(p, attr)
        res["torch"] = info
        query = ("name,memory.total,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
                 "pcie.link.width.max,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,"
                 "power.limit,temperature.gpu,driver_version")
        csv_out = run_cmd(["nvidia-smi", f"--query-gpu={query}", "--format=csv"])
        res["nvidia_smi_query_csv"] = csv_out.strip().splitlines()[:20]
        topo = run_cmd(["nvidia-smi", "topo", "-m"])
        res["nvidia_smi_topo"] = topo.strip().splitlines()[:40]
        q = run_cmd(["nvidia-smi", "-q"], timeout=60)
        lines += ["# torch / python", json.dumps(info, indent=1), "",
                  f"# nvidia-smi --query-gpu={query} --format=csv", csv_out, "",
                  "# nvidia-smi topo -m", topo, "", "# nvidia-smi -q", q]
        with open(os.path.join(self.out, "probe.txt"), "w") as f:
            f.write("\n".join(lines))
        res["probe_file"] = "probe.txt"

    # -- 2a. bandwidth
    def bandwidth(self, res: dict) -> None:
        sz = self.sz
        n = sz.bw_bytes // 2
        src = torch.randn(n, device=self.device, dtype=self.dtype)
        dst = torch.empty_like(src)
        nbytes = src.numel() * src.element_size()
        res["buffer_bytes"] = nbytes
        ms = time_reps(self.clock, lambda: dst.copy_(src), sz.bw_reps, sz.bw_warmup)
        res["copy"] = dict(stats_ms(ms), bytes_moved=2 * nbytes,
                           gb_s=rnd(2 * nbytes / (statistics.median(ms) / 1e3) / 1e9, 1),
                           best_gb_s=rnd(2 * nbytes / (min(ms) / 1e3) / 1e9, 1))
        log(f"  copy {res['copy']['gb_s']} GB/s")
        del dst
        for name, fn in (("read_sum", lambda: src.sum()), ("read_amax", lambda: src.amax())):
            ms = time_reps(self.clock, fn, sz.bw_reps, sz.bw_warmup)
            res[name] = dict(stats_ms(ms), bytes_moved=nbytes,
                             gb_s=rnd(nbytes / (statistics.median(ms) / 1e3) / 1e9, 1),
                             best_gb_s=rnd(nbytes / (min(ms) / 1e3) / 1e9, 1))
            log(f"  {name} {res[name]['gb_s']} GB/s")
        res["read_gb_s"] = max(res["read_sum"]["gb_s"] or 0, res["read_amax"]["gb_s"] or 0)
        del src

    # -- 2b. matmul
    def matmul(self, res: dict) -> None:
        sz = self.sz
        n = sz.mm_n
        flops = 2.0 * n ** 3
        a = torch.randn(n, n, device=self.device, dtype=self.dtype)
        b = torch.randn(n, n, device=self.device, dtype=self.dtype)
        c = torch.empty(n, n, device=self.device, dtype=self.dtype)
        ms = time_reps(self.clock, lambda: torch.mm(a, b, out=c), sz.mm_reps, sz.mm_warmup)
        res["bf16"] = dict(stats_ms(ms), m=n, n=n, k=n,
                           tflops=rnd(flops / (statistics.median(ms) / 1e3) / 1e12, 1),
                           best_tflops=rnd(flops / (min(ms) / 1e3) / 1e12, 1))
        log(f"  bf16 {res['bf16']['tflops']} TFLOP/s")
        res["fp8_e4m3"] = self._fp8(a, b, flops)
        del a, b, c

    def _fp8(self, a, b, flops) -> dict:
        if not self.cuda:
            return {"status": self.no_cuda("torch._scaled_mm fp8")}
        if not (hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")):
            return {"status": "skipped: this torch has no float8_e4m3fn/_scaled_mm"}
        cap = torch.cuda.get_device_capability(0)
        if cap < (8, 9):
            return {"status": f"skipped: capability {cap} < 8.9 has no fp8 tensor cores"}
        out = {}
        try:
            a8 = a.to(torch.float8_e4m3fn)
            b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()  # column-major second operand
            one = torch.tensor(1.0, device=self.device, dtype=torch.float32)
            for fast in (False, True):
                def fn(fast=fast):
                    r = torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                         use_fast_accum=fast)
                    return r[0] if isinstance(r, tuple) else r  # torch <= 2.3 returned (out, amax)
                ms = time_reps(self.clock, fn, self.sz.mm_reps, self.sz.mm_warmup)
                key = "fast_accum" if fast else "default"
                out[key] = dict(stats_ms(ms), tflops=rnd(flops / (statistics.median(ms) / 1e3) / 1e12, 1),
                                best_tflops=rnd(flops / (min(ms) / 1e3) / 1e12, 1))
                log(f"  fp8 {key} {out[key]['tflops']} TFLOP/s")
            out["status"] = "ok"
            out["tflops"] = max(out["default"]["tflops"] or 0, out["fast_accum"]["tflops"] or 0)
        except Exception as exc:  # noqa: BLE001
            out["status"] = f"error: {type(exc).__name__}: {exc}"[:500]
        return out

    # -- 2c. launch latency
    def launch(self, res: dict) -> None:
        sz = self.sz
        x = torch.zeros(1, device=self.device, dtype=torch.float32)
        N = sz.launch_n
        runs = []
        for _ in range(3):
            self.clock.sync()
            t0 = time.perf_counter()
            for _ in range(N):
                x.add_(1.0)
            t1 = time.perf_counter()
            self.clock.sync()
            t2 = time.perf_counter()
            runs.append(((t2 - t0) / N * 1e6, (t1 - t0) / N * 1e6))
        runs.sort()
        res["eager"] = {
            "launches": N,
            "us_per_launch": rnd(runs[1][0], 3),  # median of 3 runs, synchronised wall
            "cpu_enqueue_us_per_launch": rnd(runs[1][1], 3),
            "runs_us": [rnd(r[0], 3) for r in runs],
        }
        log(f"  eager {res['eager']['us_per_launch']} us/launch")
        if not self.cuda:
            res["graph"] = {"status": self.no_cuda("CUDA graph replay")}
            return
        K = sz.launch_graph_nodes

        def body():
            for _ in range(K):
                x.add_(1.0)

        g = capture_graph(body, warm=1)
        replays = max(1, N // K)
        g.replay()
        torch.cuda.synchronize()
        a = self.clock.mark()
        t0 = time.perf_counter()
        for _ in range(replays):
            g.replay()
        b = self.clock.mark()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        kernels = replays * K
        res["graph"] = {
            "status": "ok",
            "kernels": kernels,
            "nodes_per_graph": K,
            "us_per_kernel": rnd(self.clock.ms(a, b) * 1e3 / kernels, 4),
            "wall_us_per_kernel": rnd((t1 - t0) * 1e6 / kernels, 4),
        }
        log(f"  graph {res['graph']['us_per_kernel']} us/kernel")
        del g
        # one graph launch: a graph holding a single tiny kernel, replayed back to back
        g1 = capture_graph(lambda: x.add_(1.0), warm=1)
        R = 1000
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(R):
            g1.replay()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        res["graph_launch"] = {
            "replays": R,
            "us_per_replay": rnd((t2 - t0) * 1e6 / R, 3),
            "cpu_enqueue_us_per_replay": rnd((t1 - t0) * 1e6 / R, 3),
        }
        del g1

    # -- 2d. GEMV at decode shapes
    def gemv(self, res: dict) -> None:
        sz = self.sz
        res["note"] = ("[1,K] x [K,N] bf16 as F.linear(x, W[N,K]); consecutive calls cycle through "
                       "several weight copies (>= rotation_bytes in all) so no call finds its weight in L2")
        res["rotation_bytes"] = sz.gemv_min_rotation_bytes
        shapes = {}
        res["shapes"] = shapes
        for K, N in sz.gemv_shapes:
            key = f"{K}->{N}"
            if self.over_budget():
                shapes[key] = {"status": "skipped: time budget spent"}
                continue
            try:
                shapes[key] = self._gemv_one(K, N)
                s = shapes[key]
                gr = s["graph"]
                gtxt = (f"graph {gr['us_per_call']} us {gr['gb_s']} GB/s" if "us_per_call" in gr
                        else f"graph {gr.get('status')}")
                log(f"  {key}: eager {s['eager']['us_per_call']} us {s['eager']['gb_s']} GB/s; {gtxt}")
            except Exception as exc:  # noqa: BLE001
                shapes[key] = {"status": f"error: {type(exc).__name__}: {exc}"[:500]}
                log(f"  {key}: ERROR {exc}")
            free_memory(self.cuda)
            self.save()

    def _gemv_one(self, K: int, N: int) -> dict:
        sz = self.sz
        wbytes = K * N * 2
        copies = max(2, math.ceil(sz.gemv_min_rotation_bytes / wbytes))
        ws = [torch.randn(N, K, device=self.device, dtype=self.dtype) for _ in range(copies)]
        x = torch.randn(1, K, device=self.device, dtype=self.dtype)
        calls = sz.gemv_calls

        def loop():
            for i in range(calls):
                F.linear(x, ws[i % copies])

        out = {"k": K, "n": N, "weight_bytes": wbytes, "copies": copies, "calls_per_rep": calls}
        ms = time_reps(self.clock, loop, sz.gemv_reps, 1)
        per = statistics.median(ms) / calls
        out["eager"] = {"us_per_call": rnd(per * 1e3, 3), "gb_s": rnd(wbytes / (per / 1e3) / 1e9, 1),
                        "best_us_per_call": rnd(min(ms) / calls * 1e3, 3)}
        if not self.cuda:
            out["graph"] = {"status": self.no_cuda("CUDA graph loop")}
            return out
        g = capture_graph(loop, warm=1)
        ms = time_reps(self.clock, g.replay, sz.gemv_reps, 1)
        per = statistics.median(ms) / calls
        out["graph"] = {"status": "ok", "us_per_call": rnd(per * 1e3, 3),
                        "gb_s": rnd(wbytes / (per / 1e3) / 1e9, 1),
                        "best_us_per_call": rnd(min(ms) / calls * 1e3, 3)}
        del g, ws
        return out

    # -- 2e. decode loop
    def max_len(self) -> int:
        sz = self.sz
        need = sz.ctx + sz.warmup + sz.steps + 8
        return int(math.ceil(need / 64.0) * 64)

    def decode(self, res: dict) -> None:
        sz = self.sz
        res["setup"] = {
            "context": sz.ctx, "warmup_steps": sz.warmup, "timed_steps": sz.steps,
            "cache_len": self.max_len(), "dtype": "bfloat16",
            "note": ("eager attends over the cache sliced to the current length; graph modes attend "
                     "over the whole preallocated cache (cache_len) with an additive mask so shapes stay "
                     "fixed. ms/step: median over timed steps of the interval between per-step CUDA "
                     "events (GPU timeline, includes GPU idle); wall_ms_per_step: perf_counter over all "
                     "timed steps / steps. weight_gb_s = weight bytes (all but the embedding) / median step."),
        }
        configs = res.setdefault("configs", {})
        for cfg in sz.configs:
            name = cfg["name"]
            if self.over_budget():
                configs[name] = {"status": "skipped: time budget spent"}
                continue
            cres = configs.setdefault(name, {"config": {k: v for k, v in cfg.items() if k != "name"}})
            try:
                self._decode_config(cfg, cres)
                cres.setdefault("status", "ok")
            except Exception as exc:  # noqa: BLE001
                cres["status"] = f"error: {type(exc).__name__}: {exc}"[:500]
                cres["traceback"] = traceback.format_exc()[-3000:]
                log(f"  {name}: ERROR {exc}")
            free_memory(self.cuda)
            self.save()

    def _mode(self, cres: dict, key: str, fn) -> None:
        if self.over_budget():
            cres[key] = {"status": "skipped: time budget spent"}
            return
        try:
            cres[key] = fn()
            r = cres[key]
            if "median_ms" in r:
                log(f"  {key}: {r['median_ms']} ms/step, {r['tok_s']} tok/s, {r['weight_gb_s']} GB/s")
            else:
                log(f"  {key}: {r.get('status')}")
        except Exception as exc:  # noqa: BLE001
            cres[key] = {"status": f"error: {type(exc).__name__}: {exc}"[:500],
                         "traceback": traceback.format_exc()[-3000:]}
            log(f"  {key}: ERROR {exc}")
        free_memory(self.cuda)
        self.save()

    def _step_result(self, m: DecodeModel, step_ms: list[float], wall_s: float, attn_len: float) -> dict:
        sz = self.sz
        st = stats_ms(step_ms)
        med = st["median_ms"]
        wb = m.weight_bytes()
        return dict(
            st,
            batch=m.batch,
            tok_s=rnd(m.batch / (med / 1e3), 1),
            wall_ms_per_step=rnd(wall_s * 1e3 / sz.steps, 5),
            weight_bytes_per_step=wb,
            weight_gb_s=rnd(wb / (med / 1e3) / 1e9, 1),
            kv_bytes_per_step=int(m.kv_bytes_read(int(attn_len))),
            total_gb_s=rnd((wb + m.kv_bytes_read(int(attn_len))) / (med / 1e3) / 1e9, 1),
        )

    def _decode_config(self, cfg: dict, cres: dict) -> None:
        sz = self.sz
        name = cfg["name"]
        log(f"  {name}: building model (random weights)")
        torch.manual_seed(0)
        m = DecodeModel(cfg, self.device, self.dtype, self.max_len())
        cres["weight_bytes_per_step"] = m.weight_bytes()
        cres["embedding_bytes"] = m.embed.numel() * m.embed.element_size()
        m.alloc_cache(1)
        self.clock.sync()

        # consistency: the eager (sliced) and static (masked) steps agree on one step
        try:
            ids0 = torch.randint(0, m.V, (1,), device=self.device)
            le, _ = m.step_eager(ids0, sz.ctx)
            m.ids.copy_(ids0)
            m.pos.fill_(sz.ctx)
            ls = m.step_static().clone()
            le, ls = le.float(), ls.float()
            cres["eager_vs_static"] = {
                "max_abs_logit_diff": rnd((le - ls).abs().max().item(), 5),
                "logit_absmax": rnd(le.abs().max().item(), 5),
                "argmax_equal": bool((le.argmax(-1) == ls.argmax(-1)).all().item()),
            }
            del le, ls
        except Exception as exc:  # noqa: BLE001
            cres["eager_vs_static"] = {"status": f"error: {type(exc).__name__}: {exc}"[:500]}

        self._mode(cres, "b1_eager", lambda: self._run_eager(m))
        if self.cuda:
            self._mode(cres, "b1_graph", lambda: self._run_graph(m))
        else:
            cres["b1_graph"] = {"status": self.no_cuda("CUDA graph capture")}
            # exercise the capturable step anyway, uncaptured
            self._mode(cres, "b1_static_uncaptured", lambda: self._run_static(m))
        B = sz.big_batch
        if self.cuda:
            def big():
                m.alloc_cache(B)
                return self._run_graph(m)

            self._mode(cres, f"b{B}_graph", big)
        else:
            cres[f"b{B}_graph"] = {"status": self.no_cuda("CUDA graph capture")}

            def big_static():
                m.alloc_cache(B)
                return self._run_static(m)

            self._mode(cres, f"b{B}_static_uncaptured", big_static)
        m.kv = None
        del m

    def _run_eager(self, m: DecodeModel) -> dict:
        sz = self.sz
        ids = torch.randint(0, m.V, (m.batch,), device=self.device)
        pos = sz.ctx
        for _ in range(sz.warmup):
            _, ids = m.step_eager(ids, pos)
            pos += 1
        self.clock.sync()
        marks = [self.clock.mark()]
        t0 = time.perf_counter()
        for _ in range(sz.steps):
            _, ids = m.step_eager(ids, pos)
            pos += 1
            marks.append(self.clock.mark())
        self.clock.sync()
        wall = time.perf_counter() - t0
        step_ms = [self.clock.ms(a, b) for a, b in zip(marks, marks[1:])]
        mean_len = sz.ctx + sz.warmup + (sz.steps + 1) / 2
        return self._step_result(m, step_ms, wall, mean_len)

    def _timed_static(self, m: DecodeModel, step) -> dict:
        sz = self.sz
        m.ids.copy_(torch.randint(0, m.V, (m.batch,), device=self.device))
        m.pos.fill_(sz.ctx)
        for _ in range(sz.warmup):
            step()
        self.clock.sync()
        marks = [self.clock.mark()]
        t0 = time.perf_counter()
        for _ in range(sz.steps):
            step()
            marks.append(self.clock.mark())
        self.clock.sync()
        wall = time.perf_counter() - t0
        step_ms = [self.clock.ms(a, b) for a, b in zip(marks, marks[1:])]
        end_pos = int(m.pos.item())
        expect = sz.ctx + sz.warmup + sz.steps
        r = self._step_result(m, step_ms, wall, m.max_len)  # masked attention reads the whole cache
        r["position_check"] = "ok" if end_pos == expect else f"pos {end_pos} != {expect}"
        return r

    def _run_static(self, m: DecodeModel) -> dict:
        return self._timed_static(m, m.step_static)

    def _run_graph(self, m: DecodeModel) -> dict:
        m.pos.fill_(self.sz.ctx)
        t = time.perf_counter()
        fallback = None
        try:
            g = capture_graph(m.step_static, warm=3)
        except Exception as exc:  # noqa: BLE001 - retry once with the plainest attention kernels
            from torch.nn.attention import SDPBackend, sdpa_kernel

            fallback = f"capture failed ({type(exc).__name__}: {exc}"[:300] + "); retried with EFFICIENT/MATH sdpa"
            log(f"  {fallback}")
            torch.cuda.synchronize()
            m.pos.fill_(self.sz.ctx)
            with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]):
                g = capture_graph(m.step_static, warm=3)
        capture_s = time.perf_counter() - t
        try:
            r = self._timed_static(m, g.replay)
        finally:
            del g
        r["capture_s"] = rnd(capture_s, 3)
        if fallback:
            r["attention_fallback"] = fallback
        r["status"] = "ok"
        return r

    # -- 2f. traces
    def trace(self, res: dict) -> None:
        from torch.profiler import ProfilerActivity, profile, record_function

        sz = self.sz
        cfg = sz.configs[0]
        torch.manual_seed(0)
        m = DecodeModel(cfg, self.device, self.dtype, self.max_len())
        m.alloc_cache(1)
        res["config"] = cfg["name"]
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.cuda else [])
        res["activities"] = [str(a).split(".")[-1] for a in acts]
        limit = self.args.trace_max_bytes

        def profile_steps(n: int, step, path: str) -> dict:
            with profile(activities=acts, record_shapes=False, with_stack=False) as prof:
                for _ in range(n):
                    with record_function("decode_step"):
                        step()
                self.clock.sync()
            prof.export_chrome_trace(path)
            gz = path + ".gz"
            with open(path, "rb") as fi, gzip.open(gz, "wb", compresslevel=6) as fo:
                shutil.copyfileobj(fi, fo)
            raw = os.path.getsize(path)
            os.remove(path)
            return {"file": os.path.basename(gz), "steps": n, "raw_bytes": raw, "gz_bytes": os.path.getsize(gz)}

        def with_limit(step, base: str) -> dict:
            n = sz.trace_steps
            path = os.path.join(self.out, base)
            while True:
                info = profile_steps(n, step, path)
                if info["gz_bytes"] <= limit or n == 1:
                    break
                log(f"  {base}.gz is {info['gz_bytes'] / 1e6:.1f} MB > {limit / 1e6:.1f} MB; fewer steps")
                n = max(1, n // 2)
            info.update(self._trace_digest(os.path.join(self.out, info["file"])))
            log(f"  {info['file']}: {info['steps']} steps, {info['gz_bytes'] / 1e6:.2f} MB gz, "
                f"{info.get('events')} events, {info.get('kernels')} kernels")
            return info

        # eager
        state = {"ids": torch.randint(0, m.V, (1,), device=self.device), "pos": sz.ctx}

        def eager_step():
            _, state["ids"] = m.step_eager(state["ids"], state["pos"])
            state["pos"] += 1

        for _ in range(3):
            eager_step()
        self.clock.sync()
        try:
            res["eager"] = with_limit(eager_step, "trace_eager.json")
        except Exception as exc:  # noqa: BLE001
            res["eager"] = {"status": f"error: {type(exc).__name__}: {exc}"[:500],
                            "traceback": traceback.format_exc()[-3000:]}
            log(f"  eager trace: ERROR {exc}")
        self.save()

        if not self.cuda:
            res["graph"] = {"status": self.no_cuda("CUDA graph trace")}
            m.kv = None
            return
        try:
            m.pos.fill_(sz.ctx)
            g = capture_graph(m.step_static, warm=3)
            m.pos.fill_(sz.ctx)
            for _ in range(3):
                g.replay()
            torch.cuda.synchronize()
            res["graph"] = with_limit(g.replay, "trace_graph.json")
            del g
        except Exception as exc:  # noqa: BLE001
            res["graph"] = {"status": f"error: {type(exc).__name__}: {exc}"[:500],
                            "traceback": traceback.format_exc()[-3000:]}
            log(f"  graph trace: ERROR {exc}")
        m.kv = None
        del m

    @staticmethod
    def _trace_digest(gz_path: str) -> dict:
        """Check the trace is valid JSON and count what the trace reader will look for."""
        try:
            with gzip.open(gz_path, "rt") as f:
                doc = json.load(f)
        except Exception as exc:  # noqa: BLE001
            return {"valid_json": False, "json_error": repr(exc)[:300]}
        events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        cats: dict[str, int] = {}
        steps = 0
        for e in events:
            if not isinstance(e, dict):
                continue
            c = e.get("cat", "")
            cats[c] = cats.get(c, 0) + 1
            if e.get("name") == "decode_step":
                steps += 1
        return {"valid_json": True, "events": len(events), "kernels": cats.get("kernel", 0),
                "decode_step_annotations": steps, "categories": dict(sorted(cats.items()))}

    # -- 3. summary
    def summary(self) -> str:
        S = self.results["sections"]
        rows = []

        def row(a, b):
            rows.append(f"  {a:<44} {b}")

        def st(sec):
            return S.get(sec, {}).get("status", "not run")

        p = S.get("probe", {}).get("torch", {})
        rows.append(f"gpu_check summary ({self.results['mode']}, {self.results.get('elapsed_s')}s)")
        row("device", f"{p.get('device_name', 'cpu')}  torch {p.get('torch')} cuda {p.get('torch_cuda')}")
        bw = S.get("bandwidth", {})
        if "copy" in bw:
            row("bandwidth copy / read(sum) / read(amax) GB/s",
                f"{bw['copy']['gb_s']} / {bw['read_sum']['gb_s']} / {bw['read_amax']['gb_s']}")
        else:
            row("bandwidth", st("bandwidth"))
        mm = S.get("matmul", {})
        if "bf16" in mm:
            f8 = mm.get("fp8_e4m3", {})
            f8s = (f"{f8['default']['tflops']} (fast-accum {f8['fast_accum']['tflops']})"
                   if "default" in f8 and "fast_accum" in f8 else f8.get("status"))
            row(f"matmul {mm['bf16']['m']}^3 TFLOP/s bf16 | fp8", f"{mm['bf16']['tflops']} | {f8s}")
        else:
            row("matmul", st("matmul"))
        la = S.get("launch", {})
        if "eager" in la:
            gr = la.get("graph", {})
            row("launch us: eager | graph per kernel | graph launch",
                f"{la['eager']['us_per_launch']} | {gr.get('us_per_kernel', gr.get('status'))} | "
                f"{la.get('graph_launch', {}).get('us_per_replay', '-')}")
        else:
            row("launch", st("launch"))
        gv = S.get("gemv", {}).get("shapes", {})
        if gv:
            rows.append("  gemv b=1 (bf16)         eager us   GB/s  |  graph us   GB/s")
            for k, v in gv.items():
                e, g = v.get("eager", {}), v.get("graph", {})
                if e:
                    rows.append(f"    {k:<20} {e.get('us_per_call'):>10} {e.get('gb_s'):>7}  | "
                                f"{str(g.get('us_per_call', '-')):>9} {str(g.get('gb_s', '-')):>6}")
                else:
                    rows.append(f"    {k:<20} {v.get('status')}")
        else:
            row("gemv", st("gemv"))
        dc = S.get("decode", {}).get("configs", {})
        if dc:
            rows.append("  decode (ctx %s)                 ms/step   tok/s  weight GB/s" %
                        S["decode"]["setup"]["context"])
            for name, c in dc.items():
                rows.append(f"    {name}  weights {c.get('weight_bytes_per_step', 0) / 1e9:.2f} GB"
                            + ("" if c.get("status", "ok") == "ok" else f"  [{c.get('status')}]"))
                B = self.sz.big_batch
                for mode in ("b1_eager", "b1_graph", "b1_static_uncaptured", f"b{B}_graph", f"b{B}_static_uncaptured"):
                    r = c.get(mode)
                    if r is None:
                        continue
                    if "median_ms" in r:
                        rows.append(f"      {mode:<24} {r['median_ms']:>10} {r['tok_s']:>8} {r['weight_gb_s']:>8}")
                    else:
                        rows.append(f"      {mode:<24} {r.get('status')}")
        else:
            row("decode", st("decode"))
        tr = S.get("trace", {})
        for k in ("eager", "graph"):
            t = tr.get(k)
            if t:
                row(f"trace {k}", f"{t.get('file')} {t.get('steps')} steps {t.get('gz_bytes')} B gz, "
                                  f"{t.get('kernels')} kernels, valid_json={t.get('valid_json')}"
                    if "file" in t else t.get("status"))
        if not tr:
            row("trace", st("trace"))
        errs = [f"{k}: {v.get('status')}" for k, v in S.items() if str(v.get("status", "")).startswith("error")]
        for e in errs:
            row("ERROR", e)
        return "\n".join(rows)


# --------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT") or "./gpu_check_out")
    ap.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on CPU; tests every code path")
    ap.add_argument("--only", default="", help="comma list of sections: probe,bandwidth,matmul,launch,gemv,decode,trace")
    ap.add_argument("--budget-s", type=float, default=200.0,
                    help="start no new section/config/mode after this many seconds (default 200)")
    ap.add_argument("--hard-limit-s", type=float, default=230.0,
                    help="dump tracebacks and exit after this many seconds, whatever runs (default 230)")
    ap.add_argument("--trace-max-bytes", type=int, default=8_000_000, help="gzipped trace size limit")
    args = ap.parse_args(argv)
    args.only = {s.strip() for s in args.only.split(",") if s.strip()}

    if torch is None:
        print(f"gpu_check: torch is not importable ({_TORCH_ERROR!r}). Install torch with CUDA "
              "support and rerun.", flush=True)
        return 3
    cuda = torch.cuda.is_available() and not args.cpu_smoke
    if not cuda and not args.cpu_smoke:
        print(f"gpu_check: torch {torch.__version__} sees no CUDA device (torch.version.cuda="
              f"{torch.version.cuda}). Install a CUDA build of torch, or pass --cpu-smoke.", flush=True)
        return 3

    os.makedirs(args.out, exist_ok=True)
    # hard stop: whatever hangs, the process ends (results.json holds every finished section)
    faulthandler.dump_traceback_later(max(10.0, args.hard_limit_s - (time.perf_counter() - T0)), exit=True)
    if args.cpu_smoke:
        torch.set_num_threads(1)  # small ops; avoids thread-pool stalls on shared CPUs
    log(f"torch {torch.__version__}, cuda={cuda}, out={os.path.abspath(args.out)}")
    chk = Check(args, Sizes(smoke=args.cpu_smoke), cuda)
    if cuda:
        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda")  # initialise the context outside any timed section
    chk.save()
    chk.section("probe", chk.probe)
    chk.section("bandwidth", chk.bandwidth)
    chk.section("matmul", chk.matmul)
    chk.section("launch", chk.launch)
    chk.section("gemv", chk.gemv)
    chk.section("decode", chk.decode)
    chk.section("trace", chk.trace)
    chk.results["finished"] = True
    chk.save()
    faulthandler.cancel_dump_traceback_later()
    print(chk.summary(), flush=True)
    log(f"results: {os.path.join(os.path.abspath(args.out), 'results.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
