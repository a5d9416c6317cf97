"""explain: what was measured, reconciled with the model of the same deployment."""

from decodescope.explain.fit import Fit, fit_round
from decodescope.explain.gap import GapTerm, Source, Term
from decodescope.explain.observations import LogFacts, Observations, Point, TraceFacts, merge
from decodescope.explain.reconcile import Explanation, reconcile

__all__ = ["Explanation", "Fit", "GapTerm", "LogFacts", "Observations", "Point", "Source", "Term", "TraceFacts",
           "fit_round", "merge", "reconcile"]
