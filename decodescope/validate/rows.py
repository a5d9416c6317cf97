"""The published measurements (data/public.csv) and the deployment each ran
(data/deployments.csv), read into cases the model can run. A row the model cannot run
yet (a model that does not load, a GPU not in the database, no deployment mapped) is
skipped with its reason, never fatal."""

import csv
from collections import Counter
from dataclasses import dataclass, replace
from enum import Enum
from pathlib import Path

from decodescope.arch import Arch, load_arch
from decodescope.errors import DecodescopeError
from decodescope.model import Deployment, make_deployment, parse_format
from decodescope.model.engines import EngineProfile, quant_after
from decodescope.model.deployment import check, check_backend, parse_backend
from decodescope.model.predict import estimates
from decodescope.model.prefill import end_to_end, serving

DATA = Path(__file__).with_name("data")
PUBLIC_COLUMNS = ("id", "value", "source_key")
DEPLOYMENT_COLUMNS = ("id", "model", "gpu", "tp", "pp", "link", "weights", "kv", "engine", "batch", "context",
                      "spec", "accept", "draft", "draft_weights", "compare", "note")


class Compare(Enum):
    """What a published tok/s figure divides (deployments.csv `compare`)."""
    PER_USER = "per_user"  # one request's tokens over the decode time
    TOTAL = "total"  # all requests' tokens over the decode time
    # all requests' tokens over the whole generation of a static batch, its context pass
    # included (public.csv input_len / output_len give the prompt and output lengths; the
    # row's `context` column is not used: the decode context grows from input to input + output)
    END_TO_END = "end_to_end"
    # one request's tokens over its decode time in a serving benchmark that keeps `batch`
    # requests in flight, whose replacements' context passes run between the decode rounds
    # (model/prefill.py serving; input_len / output_len: the mean tokens in and out)
    SERVING = "serving"


@dataclass(frozen=True)
class Case:
    """One published measurement and the deployment it ran."""
    id: str
    source: str  # public.csv source_key: the rows of one publication
    measured: float  # tok/s as published
    compare: Compare
    accept_known: bool  # False: speculative row without an accept length (ceiling check only)
    arch: Arch
    deployment: Deployment
    note: str
    prompt: int = 0  # END_TO_END, SERVING: tokens per prompt
    output: int = 0  # END_TO_END, SERVING: tokens generated per request
    # the program the figure was timed through where it is not the engine's own loop
    # (deployments.csv `frontend`, e.g. text-generation-webui): its per-token work (its sampler,
    # streaming to a browser) is outside what the model describes, so the row checks the ceiling only
    frontend: str = ""

    @property
    def comparable(self) -> bool:
        """The model's expected value describes what was timed (accept length known, no frontend)."""
        return self.accept_known and not self.frontend

    @property
    def engine(self) -> str:
        return self.deployment.engine.id

    @property
    def tokens(self) -> float:
        """Tokens one round yields in the reported figure: accept length, times the batch for a total."""
        d = self.deployment
        return d.spec.accept_len * (1 if self.compare in (Compare.PER_USER, Compare.SERVING) else d.batch)

    def expected_round_ms(self, profile: EngineProfile) -> float:
        """ms per round as the figure counts it: END_TO_END spreads the whole generation
        over its `output` rounds of batch tokens each."""
        d = replace(self.deployment, engine=profile)
        if self.compare is Compare.END_TO_END:
            e = end_to_end(self.arch, d, self.prompt, self.output)[1]
            return (e.prefill_s + e.decode_s) * 1e3 / self.output
        if self.compare is Compare.SERVING:
            return serving(self.arch, d, self.prompt, self.output)[1].round_s * 1e3
        return estimates(self.arch, d)[1].round_ms

    def tok_s(self, profile: EngineProfile | None = None) -> tuple[float, float]:
        """(ceiling, expected) tok/s as the row reports them, expected with `profile`
        (default: the loaded one); the deployment itself is never changed."""
        d = self.deployment if profile is None else replace(self.deployment, engine=profile)
        if self.compare is Compare.END_TO_END:
            ceiling, expected = end_to_end(self.arch, d, self.prompt, self.output)
            return ceiling.tok_s_total, expected.tok_s_total
        if self.compare is Compare.SERVING:
            ceiling, expected = serving(self.arch, d, self.prompt, self.output)
            return ceiling.tok_s, expected.tok_s
        ceiling, expected = estimates(self.arch, d)
        if self.compare is Compare.TOTAL:
            return ceiling.tok_s_total, expected.tok_s_total
        return ceiling.tok_s, expected.tok_s


@dataclass(frozen=True)
class Skipped:
    id: str
    reason: str

    def to_dict(self) -> dict:
        return {"id": self.id, "reason": self.reason}


def _read(path: Path, columns: tuple[str, ...]) -> list[dict]:
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DecodescopeError(f"cannot read {path}: {e}", "restore the file from the repository") from None
    missing = [c for c in columns if rows and c not in rows[0]]
    if missing:
        raise DecodescopeError(f"{path.name} lacks the column(s) {', '.join(missing)}",
                               f"its header must name: {', '.join(columns)}")
    ids = Counter(r["id"] for r in rows)
    twice = sorted(i for i, n in ids.items() if n > 1)
    if twice:  # a second row of one id would be counted twice in every figure
        raise DecodescopeError(f"{path.name} has more than one row with the id(s) {', '.join(twice[:5])}",
                               "keep one row per id")
    return rows


def _model(name: str, data: Path) -> str:
    return str(data / name) if name.endswith(".json") else name


def _case(pub: dict, dep: dict, data: Path) -> Case:
    arch = load_arch(_model(dep["model"], data))
    k = int(dep["spec"].split(":")[1]) if ":" in dep["spec"] else 0
    known = bool(dep["accept"]) or not k
    accept = float(dep["accept"]) if dep["accept"] else (k + 1 if k else None)  # unknown: the bound
    d = make_deployment(arch, dep["gpu"], tp=int(dep["tp"]), pp=int(dep["pp"] or 1), weights=dep["weights"] or None,
                        kv=dep["kv"] or None, batch=int(dep["batch"]), context=int(dep["context"]),
                        spec=dep["spec"] or "none", accept=accept, engine=dep["engine"], link=dep["link"] or None,
                        draft=load_arch(_model(dep["draft"], data)) if dep["draft"] else None,
                        same_tokens=_flag(dep.get("same_tokens") or "", "same_tokens"), tree=dep.get("tree") or None)
    if (dep.get("split") or "") not in ("", "row"):
        raise DecodescopeError(f"split '{dep['split']}' is neither row nor empty")
    if dep.get("split") == "row":
        d = replace(d, split_rows=True)
        check(arch, d)
    if _flag(dep.get("kv_per_query_head") or "", "kv_per_query_head"):
        d = replace(d, kv_per_query_head=True)
    if dep.get("backend"):
        d = replace(d, backend=parse_backend(dep["backend"]))
        check_backend(d)
    if dep.get("moe_matvec_max_tokens"):
        d = replace(d, moe_matvec_max_tokens=int(dep["moe_matvec_max_tokens"]))
    if dep.get("fp8_quant_after"):  # the build's unfused producers, space-separated (QuantAfter values)
        d = replace(d, fp8_quant_after=quant_after(dep["fp8_quant_after"].split(), "fp8_quant_after"))
    if dep["draft_weights"]:
        d = replace(d, draft_weights=parse_format(dep["draft_weights"]))
    try:
        compare = Compare(dep["compare"])
    except ValueError:
        raise DecodescopeError(f"compare '{dep['compare']}' is not one of {', '.join(c.value for c in Compare)}") from None
    prompt, output = _lengths(pub, compare) if compare in (Compare.END_TO_END, Compare.SERVING) else (0, 0)
    if compare is Compare.END_TO_END and d.spec.method != "none":
        raise DecodescopeError("compare end_to_end is a static batch without speculative decoding")
    frontend = (dep.get("frontend") or "").strip()
    note = dep["note"] + (f"; timed through {frontend}: ceiling only" if frontend else "")
    return Case(pub["id"], pub["source_key"], float(pub["value"]), compare, known, arch, d, note, prompt, output,
                frontend)


def _lengths(pub: dict, compare: Compare) -> tuple[int, int]:
    """public.csv input_len and output_len as token counts (end_to_end and serving rows need both)."""
    try:
        prompt, output = int(pub.get("input_len", "")), int(pub.get("output_len", ""))
    except ValueError:
        raise DecodescopeError(f"compare {compare.value} needs whole-number input_len and output_len, "
                               f"got '{pub.get('input_len')}' and '{pub.get('output_len')}'") from None
    if prompt < 1 or output < 1:
        raise DecodescopeError(f"compare {compare.value} needs input_len and output_len >= 1, got {prompt} and {output}")
    return prompt, output


def _flag(value: str, column: str) -> bool:
    """A yes/no column of deployments.csv (its own column, so that the model never reads it
    from the free-text note); an older file without the column means no."""
    v = (value or "").strip().lower()
    if v not in ("", "yes", "no"):
        raise DecodescopeError(f"{column} '{value}' is neither yes, no nor empty")
    return v == "yes"
# optional columns (an older file without them, or a row that ends before them, reads as
# empty): same_tokens; tree (TOPK:N, an EAGLE tree's topk and verified tokens as the source
# states them; empty: a chain); split ("row": llama.cpp's row split over the tp GPUs, the
# only multi-GPU mode of llama.cpp builds before January 2024; empty: as tp / pp say);
# kv_per_query_head (yes: the decode attention kernel reads the KV cache once per query
# head, TensorRT-LLM's masked MHA kernel of v0.5 / v0.6.1: Deployment.kv_per_query_head);
# backend (llama.cpp rows: cuda, hip, vulkan or metal as the source states it; empty: not
# stated, the GPU vendor's usual one); moe_matvec_max_tokens (tokens per pass the row's build
# took through its MoE mat-vec kernel, where the build predates the profile's: see engines.toml);
# frontend (the program the figure was timed through where it is not the engine's own loop or
# benchmark, e.g. text-generation-webui, whose per-token sampler and streaming the model does not
# describe: such a row checks the ceiling only; empty: the engine's own)


def load_cases(data: Path = DATA) -> tuple[tuple[Case, ...], tuple[Skipped, ...]]:
    """Every row of public.csv with a deployment the model can run, and the rest with why."""
    pubs = {r["id"]: r for r in _read(data / "public.csv", PUBLIC_COLUMNS)}
    deps = _read(data / "deployments.csv", DEPLOYMENT_COLUMNS)
    cases, skipped = [], []
    for dep in deps:
        if dep["id"] not in pubs:
            skipped.append(Skipped(dep["id"], "in deployments.csv but not in public.csv"))
            continue
        try:
            cases.append(_case(pubs[dep["id"]], dep, data))
        except DecodescopeError as e:
            skipped.append(Skipped(dep["id"], e.what))
        except Exception as e:  # noqa: BLE001 - a row the model cannot run yet is reported, never fatal
            skipped.append(Skipped(dep["id"], f"{type(e).__name__}: {e}"))
    mapped = {dep["id"] for dep in deps}
    skipped += [Skipped(i, "no deployment in deployments.csv") for i in pubs if i not in mapped]
    return tuple(cases), tuple(skipped)
