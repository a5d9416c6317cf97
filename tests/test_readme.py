"""Every example command in the README runs as written.

The README's fenced ```bash blocks are examples; they run here in README order, through
bash (globs expand), in one scratch folder that links the clone's `tests/` (so
`measure ... --out run.jsonl` leaves the file that `show run.jsonl` reads, and examples
that name the bundled traces find them). A `decodescope measure http://localhost:PORT` example gets the scripted
OpenAI-compatible server on that port, writing SGLang-style log lines to the file the
example names with `--server-log`. `pip install` steps are left out (the environment
running the tests is that install); `python benchmarks/...` examples are only checked to
exist and to answer `--help` (they print figures and take minutes).
"""

import os
import re
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SCRIPTED, start, stop

README = ROOT / "README.md"
_BLOCK = re.compile(r"```bash\n(.*?)```", re.S)


def _commands() -> list[str]:
    """Shell commands of the bash blocks, continuation lines joined, comments dropped."""
    out = []
    for block in _BLOCK.findall(README.read_text()):
        for cmd in block.replace("\\\n", " ").splitlines():
            cmd = re.sub(r"\s+#.*$", "", cmd).strip()
            if cmd and not cmd.startswith("#"):
                out.append(cmd)
    return out


def _steps(cmd: str) -> list[tuple[str, list[str]]]:
    """The `&&`-joined steps of a command that the test runs (installs excluded), as
    (shell text, its words)."""
    steps = [(part.strip(), shlex.split(part)) for part in cmd.split("&&")]
    return [s for s in steps if s[1][:2] != ["pip", "install"]]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp binds: TIME_WAIT does not block
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _serve(argv: list[str], cwd: Path):
    """The scripted server on the port a measure example names, or None."""
    m = re.match(r"https?://(localhost|127\.0\.0\.1):(\d+)", argv[2]) if len(argv) > 2 else None
    if argv[:2] != ["decodescope", "measure"] or m is None:
        return None
    port = int(m.group(2))
    if not _port_free(port):
        pytest.skip(f"port {port}, which the README's measure example names, is in use here")
    cmd = [sys.executable, str(SCRIPTED), "--port", str(port), "--tokens", "24", "--interval-ms", "1"]
    if "--server-log" in argv:
        cmd += ["--log", str(cwd / argv[argv.index("--server-log") + 1])]
    return start(cmd, f"http://127.0.0.1:{port}/health", cwd / "server.out", 30)


def test_the_readme_has_examples():
    cmds = _commands()
    assert any(c.startswith("decodescope ") or " decodescope " in c for c in cmds), cmds


@pytest.mark.server
def test_every_readme_example_runs_as_written(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    failures = []
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    for cmd in _commands():
        for text, argv in _steps(cmd):
            if argv[0] == "pytest":
                continue  # the suite itself: this test is part of it
            if argv[0] == "python" and argv[1].startswith("benchmarks/"):
                text = shlex.join([sys.executable, str(ROOT / argv[1]), "--help"])
            server = _serve(argv, tmp_path)
            try:
                r = subprocess.run(["bash", "-c", text], cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=300)
            finally:
                if server is not None:
                    stop(server)
            if r.returncode != 0:
                failures.append(f"$ {text}\n(exit {r.returncode})\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
    assert not failures, "\n\n".join(failures)
