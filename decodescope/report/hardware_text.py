"""Terminal text of `decodescope calibrate` and `bench`: the numbers of to_dict(), with units."""


def calibration_text(cal, out: str | None) -> str:
    lines = [f"calibration of {cal.device} ({cal.device_name}), {cal.created}",
             f"  memory            {cal.memory_bytes / 1e9:.1f} GB",
             f"  copy bandwidth    {cal.copy_bw_bytes_s / 1e9:.1f} GB/s median, {cal.copy_bw_best_bytes_s / 1e9:.1f} GB/s best"
             " (read + write counted)"]
    lines += [f"  matmul {dt:5s}      {f / 1e12:.3f} TFLOP/s" for dt, f in cal.matmul_flops.items()]
    lines.append(f"  launch            {cal.launch_eager_us:.2f} us eager"
                 + (f", {cal.launch_graph_us:.2f} us per kernel in a CUDA graph" if cal.launch_graph_us else ""))
    for b in sorted({g.batch for g in cal.gemv}):
        lines.append(f"  weight stream     {cal.weight_bw(b) / 1e9:.1f} GB/s at batch {b} (GEMV over the model's shapes)")
    lines += [f"  allreduce         {a.us:.1f} us at {a.bytes} B ({cal.gpus} GPUs)" for a in cal.allreduce]
    lines += [f"  note: {n}" for n in cal.notes]
    lines.append(f"written to {out}: use it with `decodescope model ... --gpu {cal.device} --calibration {out}`"
                 if out else "not saved: add --out FILE to keep it")
    return "\n".join(lines)


def bench_text(r) -> str:
    d = r.to_dict()
    lines = [f"bench {d['model']} on {d['device']} ({d['device_name']}): {d['dtype']}, batch {d['batch']}, "
             f"context {d['context']}, {d['steps']} steps, {d['layers']} layers, {d['mode']}",
             f"  step              {d['step_ms']['p50']:.2f} ms p50, {d['step_ms']['p90']:.2f} ms p90",
             f"  tok/s             {d['tok_s']:.2f} per request, {d['tok_s_total']:.2f} all requests",
             f"  bytes per step    {d['weight_bytes_per_step'] / 1e9:.3f} GB weights + "
             f"{d['kv_bytes_per_step'] / 1e9:.4f} GB KV cache",
             f"  achieved          {d['achieved_bw_bytes_s'] / 1e9:.1f} GB/s"
             + (f" = {d['achieved_bw_fraction']:.0%} of the calibrated copy {d['copy_bw_bytes_s'] / 1e9:.1f} GB/s"
                if d["achieved_bw_fraction"] is not None else " (no calibration: no fraction)")]
    if d["model_expected_tok_s"]:
        lines.append(f"  model             ceiling {d['model_ceiling_tok_s']:.2f} tok/s, expected "
                     f"{d['model_expected_tok_s']:.2f} tok/s ({1e3 / d['model_expected_tok_s']:.2f} ms per step); "
                     f"measured / expected step {d['step_ms']['p50'] * d['model_expected_tok_s'] / 1e3:.2f}")
    lines += [f"  note: {n}" for n in d["notes"]]
    return "\n".join(lines)
