"""The measured round time: tok/s = accept_len / round over all points, through the origin."""

from dataclasses import dataclass

from decodescope.errors import DecodescopeError
from decodescope.explain.observations import Point

# Points whose own round times differ by more than this (max - min over the fit) did not
# run at one round time: something besides the accept length changed between them.
SHARED_ROUND_TOLERANCE = 0.03


@dataclass(frozen=True)
class Fit:
    round_ms: float  # least-squares round time over the points
    min_ms: float  # the fastest point's own round (1000 * accept_len / tok_s)
    max_ms: float  # the slowest point's
    points: int

    @property
    def spread(self) -> float:
        """(max - min) / round: how far the points are from sharing one round time."""
        return (self.max_ms - self.min_ms) / self.round_ms

    @property
    def shared(self) -> bool:
        return self.spread <= SHARED_ROUND_TOLERANCE

    def tok_s(self, accept_len: float) -> float:
        return 1000 * accept_len / self.round_ms

    def accept_for(self, tok_s: float) -> float:
        """The accept length that gives tok_s per user at this round time."""
        return tok_s * self.round_ms / 1000

    def to_dict(self) -> dict:
        return {"round_ms": self.round_ms, "min_ms": self.min_ms, "max_ms": self.max_ms, "points": self.points,
                "spread": self.spread, "shared": self.shared}


def fit_round(points: tuple[Point, ...]) -> Fit:
    """t_i = a_i / R for every point: minimising sum (t_i - a_i s)^2 over s = 1/R gives
    s = sum(a t) / sum(a^2), so R = sum(a^2) / sum(a t) (seconds, as t is tokens/s)."""
    if not points:
        raise DecodescopeError("no measured point to explain", "give a run file, --log FILE or --points A:T,...")
    saa = sum(p.accept_len ** 2 for p in points)
    sat = sum(p.accept_len * p.tok_s for p in points)
    rounds = [p.round_ms for p in points]
    return Fit(1000 * saa / sat, min(rounds), max(rounds), len(points))
