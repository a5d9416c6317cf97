"""The GPU a log names becomes `--gpu` for `model --from-log` and `explain --log`: only
when every device llama.cpp's ggml_cuda_init lists is one card the GPU database knows.
Expectations read off the excerpts' "Device N:" lines (tests/data/startup/SOURCES.md)."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from decodescope.cli.main import cli
from decodescope.serverstats.logsettings import deployment

STARTUP = "tests/data/startup/"


@pytest.mark.parametrize("log, gpu", [
    ("ik-llamacpp-a6000-full-offload.log", "rtx-a6000"),  # Device 0: NVIDIA RTX A6000
    ("llamacpp-2023-llava-2x3090.log", "rtx-3090"),  # Devices 0 and 1: NVIDIA GeForce RTX 3090
    ("ik-llamacpp-7-mixed-gpus.log", None),  # an RTX 5090 beside RTX 4090s: no one --gpu
    ("llamacpp-b3917-rtx4070.log", "rtx-4070"),  # Device 0: NVIDIA GeForce RTX 4070
])
def test_the_logged_devices_give_one_gpu_id_or_none(log, gpu):
    assert deployment(STARTUP + log).get("gpu") == gpu


def test_a_card_the_database_does_not_know_gives_no_gpu(tmp_path):
    """The RTX 4070 excerpt with its device renamed to a GTX 1080 (Pascal, not in the database)."""
    text = Path(STARTUP + "llamacpp-b3917-rtx4070.log").read_text().replace("RTX 4070", "GTX 1080")
    (tmp_path / "gtx1080.log").write_text(text)
    assert deployment(str(tmp_path / "gtx1080.log")).get("gpu") is None


def test_model_from_log_needs_no_gpu_flag_when_the_log_names_one_card():
    r = CliRunner().invoke(cli, ["model", "llama-3.1-8b", "--from-log", STARTUP + "ik-llamacpp-a6000-full-offload.log",
                                  "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["deployment"]["gpu"] == "rtx-a6000"
    typed = CliRunner().invoke(cli, ["model", "llama-3.1-8b", "--from-log",
                                      STARTUP + "ik-llamacpp-a6000-full-offload.log", "--gpu", "h100-sxm", "--json"])
    assert json.loads(typed.output)["deployment"]["gpu"] == "h100-sxm"  # a typed flag wins
