"""Shared server fixtures: real servers in their own processes, started once per session.

- scripted_server: tests/scripted_server.py, an OpenAI-compatible SSE server whose
  faults and timing are chosen per request through the model name;
- transformers_server: `transformers serve` with a tiny random-weight Llama and a small
  BPE tokenizer built here (no download), skipped only if transformers is not installed.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
SCRIPTED = ROOT / "tests" / "scripted_server.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], health_url: str, output: Path, timeout_s: float, env: dict | None = None) -> subprocess.Popen:
    """Start a server; its output goes to a file (a pipe nobody reads would fill and block it)."""
    with open(output, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"{cmd[:2]} exited with {proc.returncode}:\n{output.read_text(errors='replace')[-3000:]}"
            )
        try:
            with urllib.request.urlopen(health_url, timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.1)
    stop(proc)
    raise RuntimeError(
        f"{health_url} did not answer within {timeout_s} s:\n{output.read_text(errors='replace')[-3000:]}"
    )


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def assert_summary_reproduced(run_file: Path) -> None:
    """read_run must recompute, from the request and sample lines alone, the summary the run saved."""
    from decodescope.measure.runfile import read_run

    saved = [json.loads(line) for line in run_file.read_text().splitlines() if '"type": "summary"' in line]
    assert saved, f"{run_file} has no summary line"
    recomputed = json.loads(json.dumps(read_run(run_file).summary))
    assert recomputed == {k: v for k, v in saved[-1].items() if k != "type"}


@dataclass(frozen=True)
class Server:
    url: str  # root, without /v1
    model: str
    log: Path | None = None  # the server log it writes, if any
    llamacpp_log: Path | None = None  # the scripted server's llama-server-style per-request log


@pytest.fixture(scope="session")
def scripted_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scripted")
    log, llamacpp_log = folder / "server.log", folder / "llamacpp.log"
    log.touch()
    llamacpp_log.touch()
    port = free_port()
    cmd = [sys.executable, str(SCRIPTED), "--port", str(port), "--log", str(log), "--log-every", "4"]
    cmd += ["--llamacpp-log", str(llamacpp_log)]
    proc = start(cmd, f"http://127.0.0.1:{port}/health", folder / "output.txt", 30)
    yield Server(f"http://127.0.0.1:{port}", "scripted", log, llamacpp_log)
    stop(proc)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    pytest.importorskip("transformers", reason="transformers is not installed (pip install 'decodescope[serve]')")
    pytest.importorskip("torch", reason="torch is not installed (transformers serve needs it)")
    out = tmp_path_factory.mktemp("tiny-llama")
    _build_tiny_model(out)
    return out


def _build_tiny_model(out: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    corpus = [
        line
        for s in ("repetitive", "code", "prose")
        for line in (ROOT / f"decodescope/measure/suites/{s}.jsonl").read_text().splitlines()
    ]
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<unk>", "<s>", "</s>"]
    bpe.train_from_iterator(
        corpus,
        trainers.BpeTrainer(
            vocab_size=400, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
        ),
    )
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="</s>"
    )
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    tok.save_pretrained(out)
    config = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(out)


@pytest.fixture(scope="session")
def transformers_server(tiny_model_dir, tmp_path_factory):
    exe = shutil.which("transformers", path=str(Path(sys.executable).parent)) or shutil.which("transformers")
    if exe is None:
        pytest.skip("the transformers CLI is not installed (pip install 'transformers[serving]')")
    port = free_port()
    env = os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cmd = [exe, "serve", str(tiny_model_dir), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    output = tmp_path_factory.mktemp("transformers-serve") / "output.txt"
    proc = start(cmd, f"http://127.0.0.1:{port}/health", output, 120, env)
    yield Server(f"http://127.0.0.1:{port}", str(tiny_model_dir))
    stop(proc)


@pytest.fixture
def write_config(tmp_path):
    """A function writing a config (a dict as JSON, or bytes as they are) to `name` in this
    test's tmp dir, config.json unless told, making its folders: its path (str)."""

    def write(cfg: dict | bytes, name: str = "config.json") -> str:
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(cfg, bytes):
            p.write_bytes(cfg)
        else:
            p.write_text(json.dumps(cfg))
        return str(p)

    return write


@pytest.fixture
def config_variant(write_config):
    """A function writing the config file `base` with `changes` set at its top level and the
    fields of `text_config` set in its text_config, to a config.json in this test's tmp dir:
    its path (str)."""

    def variant(base: Path, text_config: dict | None = None, **changes) -> str:
        cfg = json.loads(Path(base).read_text())
        cfg.update(changes)
        if text_config:
            cfg["text_config"].update(text_config)
        return write_config(cfg)

    return variant


@dataclass(frozen=True)
class Measured:
    exit_code: int
    output: str  # stdout
    stderr: str
    exception: BaseException | None  # raised out of the command (not a sys.exit)
    run_file: Path

    def json(self) -> dict:
        return json.loads(self.output)


@pytest.fixture
def measure(tmp_path):
    """Run `decodescope measure URL ARGS --out <tmp>/run.jsonl` in this process."""
    from decodescope.cli.main import cli

    def run(url: str, *args: str, env: dict | None = None) -> Measured:
        out = tmp_path / f"run-{len(list(tmp_path.glob('run-*.jsonl')))}.jsonl"
        r = CliRunner().invoke(cli, ["measure", url, *args, "--out", str(out)], env=env)
        error = None if isinstance(r.exception, SystemExit) else r.exception  # e.g. a DecodescopeError
        return Measured(r.exit_code, r.stdout, r.stderr, error, out)

    return run


# the child's own high-water mark, read as it exits: ru_maxrss would also count the
# pytest process it was forked from
_PEAK = (
    "import atexit, runpy, sys\n"
    "def peak():\n"
    "    kb = next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM'))\n"
    "    sys.stderr.write(f'\\nPEAK_KB {kb}\\n')\n"
    "atexit.register(peak)\n"
    "runpy.run_module('decodescope', run_name='__main__', alter_sys=True)\n"
)


def run_cli(args: list[str], limit_s: float, env: dict | None = None) -> tuple[int, str, float, float]:
    """(exit status, stderr, peak RSS in MB, seconds) of `python -m decodescope ARGS`, killed after limit_s."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", _PEAK, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=os.environ | (env or {}),
    )
    timer = threading.Timer(limit_s, proc.kill)
    timer.start()
    try:
        stderr = proc.communicate()[1].decode(errors="replace")
    finally:
        timer.cancel()
    stderr, _, peak_kb = stderr.rpartition("\nPEAK_KB ")
    peak_mb = int(peak_kb) / 1024 if peak_kb.strip().isdigit() else float("inf")  # none: killed
    return proc.returncode, stderr, peak_mb, time.monotonic() - t0


@pytest.fixture(scope="session")
def hostile(tmp_path_factory):
    """tests/hostile_server.py: a server that attacks its client, one case per path."""
    port = free_port()
    cmd = [sys.executable, str(ROOT / "tests" / "hostile_server.py"), "--port", str(port)]
    proc = start(cmd, f"http://127.0.0.1:{port}/health", tmp_path_factory.mktemp("hostile") / "out.txt", 30)
    yield f"http://127.0.0.1:{port}"
    stop(proc)
