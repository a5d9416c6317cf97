"""reconcile(): observations against the model of the same deployment."""

from dataclasses import dataclass

from decodescope.arch import Arch
from decodescope.explain.fit import Fit, fit_round
from decodescope.explain.gap import GapTerm, Term, gap
from decodescope.explain.observations import Observations
from decodescope.model.deployment import Deployment
from decodescope.model.predict import Prediction

# What each kind of lever takes for granted, by the lever label's first word.
ASSUMPTIONS = {
    "weights": "the engine serves this format at its profile's kernel efficiency; quality is not modelled",
    "kv": "the engine's FP8 KV-cache kernels at the same bandwidth efficiency",
    "accept": "a better drafter (or more predictable text) adds one accepted token per round at today's draft cost",
    "tp": "the same link between all GPUs; more allreduces per round as modelled",
    "pp": "the same link between all GPUs; stages run one after another for a request",
    "gpu": "the same engine profile on the other GPU and its usual link",
    "engine": "the other engine's profile (kernel floors, host time) on this hardware",
}
TRACE_DISAGREES = 0.10  # a trace step this far from the measured round is of another run or load
CARRY_OVER = "the model's relative gain carries over to the measured round (what the model does not explain scales with it)"


@dataclass(frozen=True)
class ExplainedLever:
    lever: str
    change: str
    model_tok_s: float  # the model's expected tok/s per user with the change
    gain: float  # model_tok_s / the model's expected tok/s today - 1
    projected_tok_s: float  # today's measured tok/s at today's accept length x (1 + gain)
    reaches_target: bool | None  # None without --target
    assumption: str

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Target:
    tok_s: float
    accept_len_needed: float  # at the measured round
    reachable_by_accept: bool  # within k + 1 tokens per round (the draft steps allow it)
    levers: tuple[str, ...]  # levers whose projection reaches the target at today's accept length

    def to_dict(self) -> dict:
        return dict(self.__dict__) | {"levers": list(self.levers)}


@dataclass(frozen=True)
class Explanation:
    observations: Observations
    prediction: Prediction
    fit: Fit
    gap: tuple[GapTerm, ...]  # sums to fit.round_ms - ceiling round
    accept_len: float  # today's: the deployment's --accept (else the points' mean)
    levers: tuple[ExplainedLever, ...]
    target: Target | None

    @property
    def efficiency(self) -> float:
        """ceiling round / measured round: the share of the hardware's limit reached."""
        return self.prediction.ceiling.round_ms / self.fit.round_ms

    @property
    def unexplained(self) -> GapTerm:
        return next(t for t in self.gap if t.term == Term.UNEXPLAINED)

    @property
    def trace_vs_measured(self) -> float | None:
        """The trace's median step / the measured round - 1 (None without a trace)."""
        t = self.observations.trace
        return t.step_ms / self.fit.round_ms - 1 if t else None

    @property
    def trace_disagrees(self) -> bool:
        return self.trace_vs_measured is not None and abs(self.trace_vs_measured) > TRACE_DISAGREES

    @property
    def measured_tok_s(self) -> float:
        """tok/s per user at today's accept length and the measured round."""
        return self.fit.tok_s(self.accept_len)

    def to_dict(self) -> dict:
        p = self.prediction
        out = {
            "measured_round_ms": self.fit.round_ms,
            "spread": {"min_ms": self.fit.min_ms, "max_ms": self.fit.max_ms, "relative": self.fit.spread,
                       "shared_round": self.fit.shared},
            "ceiling_round_ms": p.ceiling.round_ms, "expected_round_ms": p.expected.round_ms,
            "efficiency": self.efficiency, "accept_len": self.accept_len, "measured_tok_s": self.measured_tok_s,
            "ceiling_tok_s": p.ceiling.tok_s, "expected_tok_s": p.expected.tok_s,
            "gap": [t.to_dict() for t in self.gap], "gap_total_ms": self.fit.round_ms - p.ceiling.round_ms,
            "levers": [x.to_dict() for x in self.levers], "lever_projection": CARRY_OVER,
            "observations": self.observations.to_dict(),
            "trace_vs_measured": self.trace_vs_measured, "trace_disagrees": self.trace_disagrees,
            "model": {"name": p.arch.summary(), "deployment": p.deployment.to_dict(),
                      "ceiling": p.ceiling.to_dict(), "expected": p.expected.to_dict(), "notes": list(p.notes)},
        }
        if self.target:
            out["target"] = self.target.to_dict()
            out["accept_len_needed"] = self.target.accept_len_needed
        return out


def reconcile(arch: Arch, d: Deployment, p: Prediction, obs: Observations, target: float | None = None) -> Explanation:
    """`p` is predict(arch, d, with_levers=True): the same object `decodescope model` prints."""
    fit = fit_round(obs.points)
    terms = gap(arch, d, p, fit.round_ms, obs.log, obs.trace)
    today = fit.tok_s(d.spec.accept_len)
    levers = tuple(_lever(x, p.expected.tok_s, today, target) for x in p.levers)
    t = None
    if target is not None:
        need = fit.accept_for(target)
        t = Target(target, need, need <= d.spec.k + 1, tuple(x.lever for x in levers if x.reaches_target))
    return Explanation(obs, p, fit, terms, d.spec.accept_len, levers, t)


def _lever(x, expected_tok_s: float, today_tok_s: float, target: float | None) -> ExplainedLever:
    projected = today_tok_s * x.tok_s / expected_tok_s
    kind = x.lever.split()[0]
    return ExplainedLever(x.lever, x.change, x.tok_s, x.gain, projected,
                          None if target is None else projected >= target,
                          ASSUMPTIONS.get(kind, "as modelled"))
