"""decodescope measure: stream prompt suites to a live OpenAI-compatible server."""

import asyncio
import json
import os
import sys
import time
from datetime import datetime, UTC
from pathlib import Path

import click

from decodescope.errors import DecodescopeError
from decodescope.measure import redact


def _numbers(kind):
    def parse(ctx, param, value):
        if value is None:
            return None
        try:
            out = tuple(kind(v) for v in value.split(",") if v.strip())
        except ValueError:
            raise click.BadParameter(f"expected a comma-separated list of numbers, got {value!r}") from None
        if not out or any(v <= 0 for v in out):
            raise click.BadParameter("every value must be > 0")
        return out

    return parse


@click.command()
@click.argument("url")
@click.option("--model", help="Model name to request. Default: the first id of GET /v1/models.")
@click.option("--api", type=click.Choice(["chat", "completions"]), default="chat", show_default=True)
@click.option(
    "--suite", "suites", multiple=True, help="repetitive, code, prose or a .jsonl file; repeatable. Default: all three."
)
@click.option(
    "--requests", type=click.IntRange(min=1), help="Requests per suite and load level. Default: each prompt once."
)
@click.option(
    "--concurrency", callback=_numbers(int), help="Requests in flight (closed loop); 1,4,16 sweeps. Default: 1."
)
@click.option("--rate", callback=_numbers(float), help="Poisson arrivals, requests/s (open loop); 1,2 sweeps.")
@click.option(
    "--max-tokens", type=click.IntRange(min=1), default=256, show_default=True, help="When a prompt sets none."
)
@click.option("--temperature", type=float, default=0.0, show_default=True)
@click.option("--warmup", type=click.IntRange(min=0), default=1, show_default=True, help="Requests first, not counted.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    help="s of silence before a request fails.",
)
@click.option(
    "--request-timeout",
    type=click.FloatRange(min=0, min_open=True),
    help="s a whole request may take. Default: --timeout + max tokens / 2 tok/s (188 s at the defaults).",
)
@click.option(
    "--follow-redirects",
    type=click.Choice(["none", "same-host", "any"]),
    default="none",
    flag_value="same-host",
    is_flag=False,
    show_default=True,
    help="Follow 307/308 redirects; alone: to the same host only.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the Poisson arrivals.")
@click.option(
    "--server-log",
    type=click.Path(dir_okay=False),
    help="Tail this server log during the run (waits for it to appear).",
)
@click.option("--metrics-url", help="Scrape this Prometheus /metrics URL during the run.")
@click.option(
    "--metrics-interval", type=click.FloatRange(min=0.05), default=1.0, show_default=True, help="s between scrapes."
)
@click.option(
    "--tokenizer",
    type=click.Path(exists=True),
    help="A tokenizer.json (or its folder): tokens per chunk, exact --input-tokens.",
)
@click.option("--logprobs", is_flag=True, help="Ask for per-token logprobs: exact tokens per chunk.")
@click.option(
    "--input-tokens", type=click.IntRange(min=1), help="Synthetic prompts of this many tokens instead of the suites."
)
@click.option(
    "--output-tokens",
    type=click.IntRange(min=1),
    help="Generate exactly this many tokens (ignore_eos / min_tokens where the server takes them).",
)
@click.option(
    "--duration", type=click.FloatRange(min=0, min_open=True), help="s per suite and level: keep sending this long."
)
@click.option("--slo", help="Limits for goodput, e.g. ttft_ms=500,tpot_ms=50.")
@click.option("--api-key-env", help="Environment variable holding the API key. Default: OPENAI_API_KEY if set.")
@click.option("--extra-body", help="JSON merged into every request body, e.g. '{\"ignore_eos\": true}'.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), help="Run file. Default: runs/<timestamp>.jsonl")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of tables.")
def measure(**opts):
    """Stream prompt suites to an OpenAI-compatible server at URL and time TTFT, every
    inter-chunk gap and decode tok/s per request, next to the server's own statistics."""
    from decodescope.measure import runner
    from decodescope.measure.client import Endpoint, Sampling, base_url
    from decodescope.measure.runfile import RunWriter

    if opts["concurrency"] and opts["rate"]:
        raise DecodescopeError("--concurrency and --rate are two load modes", "pass one of them")
    if opts["requests"] and opts["duration"]:
        raise DecodescopeError("--requests and --duration both say when a load level ends", "pass one of them")
    # everything local is checked before the server is contacted
    root = base_url(opts["url"])
    headers = _auth_headers(opts["api_key_env"])
    _register_secrets(opts["extra_body"], opts["metrics_url"])
    extra_body, slo = _extra_body(opts["extra_body"]), _slo(opts["slo"])
    tokenizer = _tokenizer(opts["tokenizer"])
    loaded = _suites(opts, tokenizer)
    server = _contact(root, headers, opts["timeout"])
    model = opts["model"] or _first_model(server, root)
    extra_body = _fixed_length(opts["output_tokens"], server.owned_by) | extra_body
    endpoint = Endpoint(root, opts["api"], model, headers, opts["follow_redirects"])
    max_tokens = opts["output_tokens"] or opts["max_tokens"]
    sampling = Sampling(max_tokens, opts["temperature"], opts["timeout"], extra_body, opts["request_timeout"],
                        opts["logprobs"])
    plan = runner.Plan(endpoint, sampling, loaded, _levels(opts), opts["requests"], opts["warmup"], opts["seed"],
                       opts["server_log"], opts["metrics_url"], opts["metrics_interval"], opts["duration"], slo)
    out_path = Path(opts["out_path"] or _default_out())
    writer = RunWriter(out_path, _header(opts, root, model, loaded) | {"slo": slo})
    try:
        outcome = _run(plan, writer, tokenizer, opts["as_json"])
    except DecodescopeError as e:  # e.g. a --metrics-url that fails: said without its password
        writer.discard_if_empty()
        raise DecodescopeError(redact.text(e.what), redact.text(e.fix)) from None
    except BaseException:
        writer.discard_if_empty()
        raise
    writer.close()
    _report(outcome, out_path, opts["as_json"])
    _check_lengths(outcome.requests, opts["output_tokens"])
    if outcome.interrupted:
        sys.exit(128 + outcome.stop_signal)  # 130 on Ctrl-C, 143 on SIGTERM
    if not outcome.summary["requests_ok"] and outcome.summary["requests_failed"]:
        sys.exit(1)


def _levels(opts: dict) -> tuple:
    from decodescope.measure.runner import Level

    if opts["rate"]:
        return tuple(Level(None, r) for r in opts["rate"])
    return tuple(Level(c) for c in (opts["concurrency"] or (1,)))


def _auth_headers(env_name: str | None) -> dict:
    name = env_name or "OPENAI_API_KEY"
    key = os.environ.get(name)
    if env_name and not key:
        raise DecodescopeError(
            f"--api-key-env {env_name}: that environment variable is not set", f"export {env_name}=..."
        )
    redact.register(key)
    return {"Authorization": f"Bearer {key}"} if key else {}


def _register_secrets(extra_body: str | None, metrics_url: str | None) -> None:
    """Mask a password in --metrics-url and a key inside --extra-body wherever they would show."""
    if metrics_url:
        redact.url(metrics_url)
    if extra_body:
        try:
            redact.register_in(json.loads(extra_body))
        except (ValueError, RecursionError):
            pass  # not JSON: _extra_body says so


def _contact(root: str, headers: dict, timeout_s: float):
    from decodescope.measure.client import open_session
    from decodescope.measure.contact import first_contact

    async def contact():
        async with open_session(1, timeout_s) as session:
            try:  # a deadline of its own: a body that trickles forever never trips the read timeout
                async with asyncio.timeout(timeout_s):
                    return await first_contact(session, root, headers)
            except TimeoutError:
                raise DecodescopeError(
                    redact.text(f"GET {root}/v1/models did not finish within --timeout {timeout_s:g} s"),
                    "check the URL, or raise --timeout",
                ) from None

    return asyncio.run(contact())


def _first_model(server, root: str) -> str:
    if not server.models:
        why = f": {server.problem}" if server.problem else ""
        raise DecodescopeError(redact.text(f"{root}/v1/models lists no model{why}"), "pass --model NAME")
    return server.models[0]


def _suites(opts: dict, tokenizer) -> tuple:
    from decodescope.measure import suites

    if opts["input_tokens"] is None:
        return tuple(suites.load_suite(s) for s in (opts["suites"] or suites.BUNDLED))
    if opts["suites"]:
        raise DecodescopeError("--input-tokens makes its own prompts", "drop --suite, or drop --input-tokens")
    suite, exact = suites.synthetic_suite(opts["input_tokens"], 12, tokenizer, opts["seed"])
    if not exact:
        _warn(
            f"--input-tokens {opts['input_tokens']}: approximate (one common word per token); --tokenizer makes it exact"
        )
    return (suite,)


def _fixed_length(output_tokens: int | None, owned_by: str | None) -> dict:
    from decodescope.measure.contact import fixed_length_body

    if output_tokens is None:
        return {}
    body = fixed_length_body(owned_by, output_tokens)
    if not body:
        _warn(
            f"--output-tokens: the server ({owned_by or 'unknown engine'}) is not known to take ignore_eos or "
            "min_tokens; a request may stop early (checked against its usage after the run)"
        )
    return body


def _check_lengths(requests, output_tokens: int | None) -> None:
    if output_tokens is None:
        return
    short = [r for r in requests if r.ok and not r.warmup and r.output_tokens != output_tokens]
    if short:
        _warn(
            f"--output-tokens {output_tokens}: {len(short)} requests returned another count (e.g. {short[0].output_tokens})"
        )


def _slo(text: str | None) -> dict | None:
    fix = "e.g. --slo ttft_ms=500,tpot_ms=50 (ms; either or both)"
    if not text:
        return None
    out = {}
    for part in text.split(","):
        key, _, value = part.strip().partition("=")
        try:
            out[key] = float(value)
        except ValueError:
            raise DecodescopeError(f"--slo {text!r}: {part!r} is not NAME=NUMBER", fix) from None
        if key not in ("ttft_ms", "tpot_ms") or out[key] <= 0:
            raise DecodescopeError(f"--slo {text!r}: {part!r}: the limits are ttft_ms and tpot_ms, > 0", fix)
    return out


def _warn(msg: str) -> None:
    click.echo(f"warning: {msg}", err=True)


def _extra_body(text: str | None) -> dict:
    if not text:
        return {}
    try:
        body = json.loads(text)
    except ValueError as e:
        raise DecodescopeError(f"--extra-body is not JSON: {e}", "pass an object, e.g. '{\"ignore_eos\": true}'") from e
    if not isinstance(body, dict):
        raise DecodescopeError("--extra-body must be a JSON object", "e.g. '{\"ignore_eos\": true}'")
    return body


def _tokenizer(path):
    if not path:
        return None
    from decodescope.measure.tokens import load_tokenizer

    return load_tokenizer(path)


def _default_out() -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path, n = Path("runs") / f"{stamp}.jsonl", 1
    while path.exists():
        n += 1
        path = Path("runs") / f"{stamp}-{n}.jsonl"
    return str(path)


def _header(opts: dict, root: str, model: str, loaded) -> dict:
    from importlib.metadata import version

    options = {k: v for k, v in opts.items() if v is not None and k != "as_json"} | {"url": root}
    return {
        "command": "measure",
        "decodescope_version": version("decodescope"),
        "url": root,
        "model": model,
        "api": opts["api"],
        "suites": [s.name for s in loaded],
        "start_time": datetime.now(UTC).isoformat(timespec="seconds"),
        "start_unix_s": time.time(),
        "options": redact.mapping(options),  # never a credential: the key's variable name, URLs without passwords
    }


def _run(plan, writer, tokenizer, as_json: bool):
    from rich.console import Console

    from decodescope.measure.runner import Runner, run_loop

    err = Console(stderr=True)

    def warn(msg: str) -> None:
        err.print(redact.text(msg), style="yellow", markup=False, highlight=False)

    if as_json or not err.is_terminal:
        return run_loop(Runner(plan, writer, tokenizer, None, warn).run())
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = None if plan.duration_s else sum(len(jobs) for _, jobs in plan.phases())
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    # redrawn only as requests finish: a refresh thread would take the GIL from the event
    # loop at random moments and show up as inter-chunk jitter
    with Progress(*columns, console=err, transient=True, auto_refresh=False) as progress:
        task = progress.add_task("measure", total=total)

        def advance(r):
            level = f"rate {r.rate:g}/s" if r.rate else f"concurrency {r.concurrency}"
            label = "warm-up" if r.warmup else f"{r.suite}, {level}"
            progress.update(task, advance=1, description=f"{label} ({'ok' if r.ok else r.error_kind})", refresh=True)

        return run_loop(Runner(plan, writer, tokenizer, advance, warn).run())


def _report(outcome, out_path: Path, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({**outcome.summary, "run_file": str(out_path)}, indent=2))
        return
    from decodescope.report.measure_table import print_summary

    print_summary(outcome.summary, str(out_path))
