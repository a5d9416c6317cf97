"""The four forms of the report say the same numbers; the HTML is self-contained and
renders in a real headless Chromium with every user-supplied string escaped."""

import json
import re
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from decodescope.cli.main import cli
from decodescope.report.explain_common import ms, pct, tok_s

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
browser = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")


def run(*args):
    r = CliRunner().invoke(cli, list(args))
    assert r.exit_code == 0, (r.output, r.exception)
    return r.stdout


@pytest.fixture(scope="module")
def forms(tmp_path_factory):
    html = tmp_path_factory.mktemp("demo") / "report.html"
    out = {"json": json.loads(run("demo", "--json")), "markdown": run("demo", "--markdown"),
           "terminal": run("demo", "--html", str(html))}
    out["html"] = html.read_text()
    return out


def test_every_form_says_the_same_numbers(forms):
    j = forms["json"]
    quantities = [ms(j["measured_round_ms"]), ms(j["ceiling_round_ms"]), ms(j["expected_round_ms"]),
                  pct(j["efficiency"]), tok_s(j["measured_tok_s"]), tok_s(j["ceiling_tok_s"]),
                  tok_s(j["expected_tok_s"]), f"{j['accept_len_needed']:.2f}"]
    quantities += [f"{t['ms']:+.2f} ms" for t in j["gap"]]
    quantities += [tok_s(x["projected_tok_s"]) for x in j["levers"]]
    for form in ("markdown", "terminal", "html"):
        text = re.sub(r"\s+", " ", forms[form])
        missing = [q for q in quantities if q not in text]
        assert not missing, (form, missing)
    # and the reference figures: 55.40 ms measured, 3.88 for 70 tok/s
    assert "55.40 ms" in forms["terminal"] and "3.88" in forms["terminal"]


def test_the_html_is_self_contained(forms):
    h = forms["html"]
    assert h.count("<svg") >= 3  # round breakdown, tok/s vs accept length, levers
    # nothing fetched at view time: no script, no external stylesheet, font or image
    assert "<script" not in h and "<link" not in h and "@import" not in h
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', h)


def test_demo_without_html_never_imports_matplotlib_or_jinja2():
    code = ("import sys; from click.testing import CliRunner; from decodescope.cli.main import cli; "
            "r = CliRunner().invoke(cli, ['demo']); assert r.exit_code == 0, r.output; "
            "print(sorted(m for m in ('matplotlib', 'jinja2') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr


def _chromium(*args, tmp):
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--no-first-run", f"--user-data-dir={tmp / 'profile'}",
           "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """A report whose model folder, log file name and log text carry <script> tags."""
    from decodescope.arch import presets
    from decodescope.cli.demo_cmd import DATA
    tmp = tmp_path_factory.mktemp("hostile")
    model = tmp / "<script>alert('model')"  # a file name cannot hold the closing tag's slash
    model.mkdir()
    preset = presets()["qwen3.6-27b"]["file"]
    shutil.copy(DATA.parent.parent / "arch" / "presets" / preset, model / "config.json")
    log = tmp / "<script>alert('file').log"
    log.write_text("<script>alert('log')</script>\n" + (DATA / "reference-sglang.log").read_text())
    html = tmp / "report.html"
    run("explain", str(model), "--gpu", "rtx-a6000", "--tp", "2", "--link", "pcie-sys", "--spec", "mtp:3",
        "--context", "500", "--engine", "sglang", "--log", str(log), "--points", "3.98:72", "--target", "70",
        "--html", str(html))
    return tmp, html


def test_user_strings_are_escaped_in_the_html(hostile):
    _, html = hostile
    text = html.read_text()
    assert "<script" not in text
    assert "&lt;script&gt;alert(&#39;model&#39;)" in text
    assert "&lt;script&gt;alert(&#39;file&#39;).log" in text


@browser
def test_chromium_renders_the_report_with_the_scripts_as_text(hostile):
    tmp, html = hostile
    r = _chromium("--dump-dom", html.as_uri(), tmp=tmp)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = r.stdout
    assert "<script" not in dom and "&lt;script&gt;alert('model')" in dom
    assert dom.count("<svg") >= 3 and 'id="plot-round"' in dom and 'id="plot-accept"' in dom
    assert "Uncaught" not in r.stderr and "CONSOLE" not in r.stderr  # no page error, no console output


@browser
def test_chromium_shows_the_plots(hostile):
    """The screenshot holds the plots' own colours: the ceiling's weights bar (#4c72b0),
    the fitted line and lever bars (green), the measured points (black)."""
    from PIL import Image
    tmp, html = hostile
    png = tmp / "shot.png"
    r = _chromium(f"--screenshot={png}", "--window-size=1200,4000", "--hide-scrollbars", html.as_uri(), tmp=tmp)
    assert r.returncode == 0 and png.exists(), r.stderr[-2000:]
    img = Image.open(png).convert("RGB")
    counts = {rgb: n for n, rgb in img.getcolors(maxcolors=1 << 24)}

    def near(target, tol=12):
        return sum(n for c, n in counts.items() if all(abs(a - b) <= tol for a, b in zip(c, target)))
    assert near((0x4c, 0x72, 0xb0)) > 5000, "weights bars of the round breakdown"
    assert near((0x55, 0xa8, 0x68)) > 5000, "draft segments and lever bars"
