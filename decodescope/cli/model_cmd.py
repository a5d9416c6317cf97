"""`decodescope model`: the decode round of a deployment, its ceiling and its levers."""

import json
from dataclasses import replace

import click

from decodescope.arch import build_arch, load_config, presets
from decodescope.hardware.spec import CPU


@click.command()
@click.argument("model", required=False)
@click.option("--gpu", help="GPU id or alias (see `decodescope gpus`)")
@click.option("--gpus", type=int, help="GPUs of one replica [default: tp x pp]")
@click.option("--tp", type=int, default=1, show_default=True, help="tensor-parallel size")
@click.option("--pp", type=int, default=1, show_default=True, help="pipeline (layer-split) stages")
@click.option("--ep", type=int, default=1, show_default=True, help="expert-parallel size (divides tp)")
@click.option("--weights", help="bf16 fp16 fp8 int8 int4-gN nvfp4 mxfp4 mxfp8 q4_k_m q5_k_m q6_k q8_0 mxfp4_moe bpw:X, "
                                "or a .gguf file (each tensor's type from its header) [default: as the config]")
@click.option("--kv", type=click.Choice(["bf16", "fp16", "fp8"]), help="KV-cache dtype [default: as the config, else bf16]")
@click.option("--batch", type=int, default=1, show_default=True, help="requests decoding together")
@click.option("--context", type=int, default=1024, show_default=True, help="tokens in each request's KV cache")
@click.option("--spec", default="none", show_default=True, help="none | mtp:K | eagle:K | draft:K | ngram:K")
@click.option("--tree", help="EAGLE tree as TOPK:N: each draft step after the first runs TOPK branches and "
                             "verify scores N tokens per request (SGLang --speculative-eagle-topk, "
                             "--speculative-num-draft-tokens) [default: a chain, 1:K+1]")
@click.option("--accept", type=float, help="accept_len: mean tokens per round incl. the bonus token")
@click.option("--draft", "draft_model", help="draft model (draft:K) or EAGLE head config (eagle:K)")
@click.option("--engine", default="generic", show_default=True,
              help="generic sglang vllm trtllm llamacpp gpt-fast exllamav2 mlc transformers")
@click.option("--backend", help="the engine's GPU backend (llamacpp: cuda hip vulkan metal; sglang: cuda on "
                                "NVIDIA, hip on AMD) [default: the GPU vendor's usual one: NVIDIA cuda, AMD hip, "
                                "Apple metal, Intel vulkan]")
@click.option("--link", help="GPU<->GPU link: nvlink nvswitch pcie-switch pcie pcie-sys xgmi network "
                             "[default: the GPU's usual one]")
@click.option("--same-tokens", is_flag=True,
              help="all requests decode the same token at each step, as benchmarks that feed one token id "
                   "to every sequence do: a MoE layer then reads the experts of one request "
                   "(KV cache and state are still per request)")
@click.option("--split-mode", "split_rows", type=click.Choice(["tensor", "row"]), default="tensor", show_default=True,
              callback=lambda ctx, param, value: value == "row",
              help="how the --tp GPUs share each weight matrix: tensor (tensor parallel, an allreduce after each "
                   "block) or row (llama.cpp --split-mode row, its only multi-GPU mode before January 2024: "
                   "the main GPU holds the KV cache and gathers every matmul's output)")
@click.option("--calibration", type=click.Path(dir_okay=False),
              help="calibration file (`decodescope calibrate`): measured numbers replace the engine profile's")
@click.option("--from-log", "from_log", type=click.Path(dir_okay=False),
              help="take the deployment (model, tp, pp, ep, weights, kv, spec, engine, accept) from a server "
                   "log's start-up lines; flags typed here win")
@click.option("--json", "as_json", is_flag=True, help="print one JSON object")
@click.option("--list", "list_presets", is_flag=True, help="list the bundled model presets")
@click.pass_context
def model(ctx, model, gpu, gpus, tp, pp, ep, weights, kv, batch, context, spec, tree, accept, draft_model, engine,
          backend, link, same_tokens, split_rows, calibration, from_log, as_json, list_presets):
    """Model one decode round of MODEL (config.json, folder, preset, hub id or GGUF file) on GPUs."""
    if list_presets:
        for name, p in presets().items():
            click.echo(f"{name:28s} {p['file']}")
        return
    if from_log:
        given = dict(gpu=gpu, tp=tp, pp=pp, ep=ep, weights=weights, kv=kv, spec=spec, engine=engine, accept=accept)
        model, given = log_deployment(ctx, from_log, model, given, with_accept=True)
        gpu, tp, pp, ep, weights, kv, spec, engine, accept = (given[k] for k in ("gpu", "tp", "pp", "ep", "weights",
                                                                                 "kv", "spec", "engine", "accept"))
    if not model or not gpu:
        raise click.UsageError("MODEL and --gpu are required (e.g. decodescope model llama-3.1-8b --gpu h100-sxm)")
    from decodescope.model import make_deployment, predict
    raw = load_config(model)
    arch = build_arch(raw)
    d = make_deployment(arch, gpu, tp=tp, pp=pp, ep=ep, gpus=gpus, weights=weights, kv=kv, batch=batch,
                        context=context, spec=spec, accept=accept, engine=engine, link=link,
                        draft=_draft(draft_model) if draft_model else None, same_tokens=same_tokens,
                        tree=tree, split_rows=split_rows, backend=backend)
    measured = ()
    if calibration or d.gpu.id == CPU:  # importing the calibration module costs ~3 % of a run
        from decodescope.hardware.calibration import calibrate_deployment
        d, measured = calibrate_deployment(d, calibration)
    p = predict(arch, d, with_levers=True, max_positions=_max_positions(raw.data))
    p = replace(p, notes=p.notes + measured)
    if as_json:
        click.echo(json.dumps(p.to_dict(), indent=1))
    else:
        from decodescope.report.terminal import print_prediction
        print_prediction(p)


LOG_FLAGS = ("gpu", "tp", "pp", "ep", "weights", "kv", "spec", "engine")  # what a log's settings may set


def log_deployment(ctx: click.Context, path: str, model: str | None, flags: dict, with_accept: bool = False):
    """(MODEL, flags) with the log's start-up settings where no flag was typed: a typed flag
    (click's parameter source other than its default) wins. MODEL may be left out when the
    log names a preset, a local path or a hub id in the local cache. `with_accept`: a log
    that speculates gives --accept too (its steady accept length)."""
    from click.core import ParameterSource

    from decodescope.arch.config import offline_model
    from decodescope.errors import DecodescopeError
    from decodescope.serverstats.logsettings import deployment

    logged = deployment(path)
    typed = {k for k in flags if ctx.get_parameter_source(k) not in (None, ParameterSource.DEFAULT)}
    flags = {**flags, **{k: v for k, v in logged.items() if k in LOG_FLAGS and k not in typed}}
    if not model:
        model = offline_model(logged["model"]) if "model" in logged else None
    if model is None:
        said = f"names the model '{logged['model']}'" if "model" in logged else "states no model at start-up"
        raise DecodescopeError(f"{path} {said}: not a preset, a local path or a hub id in the local cache",
                               "give MODEL too (a preset, a folder with config.json or a hub id), e.g. "
                               f"decodescope model qwen3-8b --from-log {path} --gpu h100-sxm")
    if with_accept and flags["spec"] != "none" and flags.get("accept") is None:
        flags["accept"] = _log_accept(path)
        if flags["accept"] is None:
            raise DecodescopeError(f"{path} starts the server with --spec {flags['spec']} but logs no accept length",
                                   "add --accept (tokens per round incl. the bonus token), or give a log with "
                                   "its decode statistics lines")
    return model, flags


def _log_accept(path: str) -> float | None:
    """The steady accept length of the log's last server run, None when it logs none."""
    from decodescope.serverstats.logio import open_lines
    from decodescope.serverstats.logscan import scan_log

    with open_lines(path) as lines:
        summary = scan_log(lines).summary()
    spread = summary.segments[-1].accept_len if summary.segments else summary.accept_len
    return getattr(spread, "mean", spread)  # every window's acceptance counts, idle or not


def _draft(model: str):
    """A draft model, or an EAGLE-3 head whose LM head covers only its draft_vocab_size."""
    raw = load_config(model)
    arch = build_arch(raw)
    dv = raw.data.get("draft_vocab_size")
    return replace(arch, vocab_size=dv) if isinstance(dv, int) and 0 < dv < arch.vocab_size else arch


def _max_positions(data: dict) -> int | None:
    text = data.get("text_config") if isinstance(data.get("text_config"), dict) else {}
    # GPT-2 and StarCoder name it n_positions: rows of a learned table, no rope to stretch
    n = data.get("max_position_embeddings", text.get("max_position_embeddings", data.get("n_positions")))
    return n if isinstance(n, int) and n > 0 else None
