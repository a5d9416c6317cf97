"""EAGLE trees as SGLang runs them (--speculative-num-steps K --speculative-eagle-topk T
--speculative-num-draft-tokens N): the verify pass scores N tokens per request, and each
draft step after the first runs T branches per request (eagle_worker.py draft_forward,
https://github.com/sgl-project/sglang/blob/00559eacbf0841146db7e27e445d1971e35e6294/
python/sglang/srt/speculative/eagle_worker.py: "we get 1 token from draft prefill and
(#spec steps - 1) tokens here", each forward over batch x topk tokens; organize_draft_results
keeps the N-1 best of the T + (K-1) T^2 scored candidates). With T = 1 SGLang sets
N = K+1 (python/sglang/srt/server_args.py: "speculative_num_draft_tokens is adjusted to
speculative_num_steps + 1 when speculative_eagle_topk == 1").

Llama-3.1-8B (hidden 4096, 32 heads of 128, 8 KV heads, MLP 14336, 32 layers, vocab 128256):
  linear weights per layer: attention 4096 x (4096 + 1024 + 1024 + 4096) = 41,943,040
                            MLP 3 x 4096 x 14336 = 176,160,768; sum 218,103,808
  32 layers 6,979,321,856 + LM head 128256 x 4096 = 525,336,576: 7,504,658,432 weights,
  2 FLOP each per token verified."""

import csv
import shutil

import pytest

from decodescope.arch import load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import make_deployment, parse_spec, predict
from decodescope.model.ops import Rates
from decodescope.model.round import draft_ops
from decodescope.validate.rows import DATA, load_cases

TARGET = 7_504_658_432
# the EAGLE-3 head modelled without --draft: one decoder layer of the target's shape
# (218,103,808), fc 4096 x 12288 (50,331,648) and an LM head over 32000 draft tokens
# (32000 x 4096 = 131,072,000): 399,507,456 weights in the first step; the fc fuses the
# target's 3 hidden states, which only the step after verify has: later steps 349,175,808
HEAD = 399_507_456
HEAD_LATER = 349_175_808
FC = 50_331_648


def _run(tree, k=4, context=1024):
    arch = load_arch("llama-3.1-8b")
    d = make_deployment(arch, "h100-sxm", spec=f"eagle:{k}", accept=3.0, tree=tree, context=context)
    return {c.component: c for c in predict(arch, d).ceiling.breakdown}


def test_verify_scores_the_tree_tokens():
    """eagle:4 as a chain verifies 5 tokens, the 4:16 tree 16: 11 more tokens through every
    weight, 2 x 7,504,658,432 x 11 = 165,102,485,504 FLOP; the weights are read once either way."""
    chain, tree = _run(None), _run("4:16")
    assert tree["weights"].flops - chain["weights"].flops == pytest.approx(2 * TARGET * 11, rel=1e-9)
    assert tree["weights"].flops == pytest.approx(2 * TARGET * 16, rel=1e-9)
    assert tree["weights"].bytes == pytest.approx(chain["weights"].bytes, rel=1e-12)


def test_draft_steps_after_the_first_run_topk_branches():
    """Steps 2..4 run 4 tokens per request instead of 1: 3 steps x 3 more tokens.
    Head weights without the fc: 9 x 2 x 349,175,808 = 6,285,164,544 FLOP.
    Attention (4 x 32 heads x 128 x context FLOP per token, context = 1024 + tokens of the
    pass): one step 4 x 16384 x 1028 - 16384 x 1025 = 16384 x 3087 = 50,577,408; x 3 = 151,732,224.
    Sum 6,436,896,768 FLOP."""
    chain, tree = _run(None), _run("4:16")
    assert tree["draft"].flops - chain["draft"].flops == pytest.approx(6_436_896_768, rel=1e-9)


def test_eagle3_fc_runs_in_the_first_draft_step_only():
    """The fc (4096 x 12288 = 50,331,648 weights, 16-bit, replicated) fuses the target's
    3 hidden states; SGLang's llama_eagle3.py skips it once the head feeds its own hidden
    state. eagle:4 reads it once a round: 4 steps x 2 B x 349,175,808 + 2 B x 50,331,648 of
    head weights (2,894,069,760 B), against 4 x 2 B x 399,507,456 were it in every step:
    3 x 100,663,296 = 301,989,888 B fewer. Chain of 4: 2 FLOP x (4 x 349,175,808 + 50,331,648) = 2,894,069,760
    FLOP of head weights."""
    draft = _run(None)["draft"]
    head_bytes = 2 * (4 * HEAD_LATER + FC)
    assert 4 * 2 * HEAD - head_bytes == 301_989_888
    arch = load_arch("llama-3.1-8b")
    d = make_deployment(arch, "h100-sxm", spec="eagle:4", accept=3.0, context=1024)
    ops = draft_ops(arch, d, Rates(1e12, {}, {"bf16": 1e15}, 0.0, 0.0, float("inf")))
    weights = [op for op in ops if op.component == "weights"]
    # + per step 4 norms of 4096 x 2 B (input, post-attention, the head's own, the final): 4 x 32,768 = 131,072 B
    assert sum(op.bytes for op in weights) == pytest.approx(head_bytes + 131_072, rel=1e-12)
    assert sum(op.flops for op in weights) == pytest.approx(2 * (4 * HEAD_LATER + FC), rel=1e-12)
    assert [op.name for op in weights].count("fc") == 1
    assert draft.bytes > head_bytes


def test_default_and_topk_one_are_the_chain():
    s = parse_spec("eagle:5", 3.0)
    assert (s.topk, s.tokens_per_verify) == (1, 6)
    assert parse_spec("eagle:5", 3.0, "1:6").tokens_per_verify == 6


@pytest.mark.parametrize("tree,why", [
    ("1:8", "6 tokens"),  # topk 1: SGLang forces N = K+1 = 6
    ("4:5", "6 to"),  # fewer than the chain's K+1
    ("2:20", "6 to 19"),  # 2 + (5 - 1) x 2^2 = 18 candidates + the verified token: at most 19
    ("0:6", "out of range"),
    ("64:100", "out of range"),
    ("4x16", "not understood"),
])
def test_bad_trees_are_refused(tree, why):
    with pytest.raises(DecodescopeError) as e:
        parse_spec("eagle:5", 3.0, tree)
    assert why in e.value.what or why in e.value.fix


def test_tree_needs_eagle_style_drafting():
    with pytest.raises(DecodescopeError):
        parse_spec("draft:4", 3.0, "4:16")
    with pytest.raises(DecodescopeError):
        parse_spec("none", None, "4:16")


def test_rows_that_state_the_tree_use_it():
    """Settings as published: SGL4716 (--speculative-num-steps 8 --speculative-eagle-topk 8
    --speculative-num-draft-tokens 64), EAGLE173 (5 / 8 / 64), GPUSTACK (4 / 4 / 16)."""
    cases, _ = load_cases()
    got = {c.id: (c.deployment.spec.k, c.deployment.spec.topk, c.deployment.spec.tokens_per_verify)
           for c in cases if c.deployment.spec.topk > 1}
    want = {"SGL4716-02": (8, 8, 64), "SGL4716-03": (8, 8, 64), "EAGLE173-02": (5, 8, 64),
            "EAGLE173-03": (5, 8, 64), **{f"GPUSTACK-{n:02d}": (4, 4, 16) for n in range(8, 13)}}
    assert got == want


def test_tree_column_is_optional_and_checked(tmp_path):
    """A deployments.csv without the column reads every row as a chain; a tree SGLang
    could not run (topk 8 with 5 steps verifies at most 1 + 8 + 4 x 64 = 265 tokens) is
    that row's one clear reason to be skipped."""
    shutil.copytree(DATA, tmp_path, dirs_exist_ok=True)
    path = tmp_path / "deployments.csv"
    with open(path, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["id"].startswith("EAGLE173-")]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, [k for k in rows[0] if k != "tree"], extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    cases, _ = load_cases(tmp_path)
    assert cases and all(c.deployment.spec.topk == 1 for c in cases)
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(rows[0]), lineterminator="\n")
        w.writeheader()
        w.writerow({**rows[1], "tree": "8:300"})
    _, skipped = load_cases(tmp_path)
    assert any(s.id == "EAGLE173-02" and "6 to 265 tokens" in s.reason for s in skipped)


def test_model_and_explain_take_the_tree():
    from click.testing import CliRunner

    from decodescope.cli.main import cli
    flags = ["llama-3.1-8b", "--gpu", "h100-sxm", "--spec", "eagle:5", "--tree", "8:64", "--engine", "sglang"]
    r = CliRunner().invoke(cli, ["model", *flags, "--accept", "3"])
    assert r.exit_code == 0 and "tree of topk 8 verifying 64 tokens" in r.output
    r = CliRunner().invoke(cli, ["explain", "--points", "3:200", *flags])
    assert r.exit_code == 0 and "spec eagle:5 tree 8:64" in r.output
