"""Efficient global optimisation: a space-filling first design, then rounds of `batch` runs
chosen on the GPs of the runs so far, each round one batch through the executor and the store.

Every choice is a function of the study's seed and the runs' values, so a study started again
after a kill asks for the same runs round after round, finds them in the store and goes on
where it stopped, ending with the same result; the executor's batch size changes nothing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from studyrun.analyses.bayesian.acquisition import Data, fill, fit_models, labels, modelled, propose
from studyrun.analyses.pareto.terms import constraint
from studyrun.analyses.search.batching import Evaluations
from studyrun.analyses.search.fit import Box, make_box
from studyrun.blocks.params import sample_unit
from studyrun.core.design import Evaluate, Outcome
from studyrun.core.numbers import finite_or_none
from studyrun.core.threads import held_to_cores

# converged: EI below this x the objective's spread (unless `tolerance` is given); GPs of smooth
# objectives are sure of themselves: on a 10-parameter ellipsoid EI was 1e-7 x its spread with the
# best run still 2.3% above the minimum (benchmarks/bench_bayesopt.py)
TOLERANCE = 1e-12
SAME = 1e-9  # a proposed point this near (unit box, each coordinate) to a run is that run


def child(seed: np.random.SeedSequence, *key: int) -> np.random.SeedSequence:
    """A seed of its own for each use and round, the same however often it is asked for."""
    return np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, *key))


def initial_design(box: Box, count: int, seed: np.random.SeedSequence) -> np.ndarray:
    """The nominal start, then a Latin hypercube of count - 1 points (unit coordinates)."""
    start = np.clip(box.to_unit(box.start), 0.0, 1.0)[None]
    if count <= 1:
        return start
    return np.vstack([start, sample_unit(count - 1, len(box.names), "lhs", child(seed, 0))])


def defaults(spec: Any, dimension: int) -> tuple[int, int]:
    """(initial runs, max_evaluations) with their defaults filled in."""
    initial = spec.initial if spec.initial is not None else 2 * dimension + 2
    most = spec.max_evaluations if spec.max_evaluations is not None else 20 * dimension + 10
    return initial, most


class Runs:
    """Every run in the order asked: unit point, objective, constraint gaps, quantities, and
    the round it belongs to; a failed run (or one without a finite objective or gap) failed."""

    def __init__(self, spec: Any, evaluate: Evaluate, box: Box) -> None:
        self.box = box
        self.constraints = [constraint(text, False, i) for i, text in enumerate(spec.constraints)]
        terms = [q for _, q, _ in spec.terms()]
        self.quantities = list(dict.fromkeys(terms + [q for c in self.constraints
                                                       for q in sorted(c.quantities)]))
        self.cost = spec.summariser(self.quantities)
        self.evaluations = Evaluations(evaluate, self.summarise)
        self.unit, self.rounds, self.answers = [], [], []  # type: ignore[var-annotated]

    def summarise(self, outcome: Outcome) -> dict[str, np.ndarray]:
        summary = self.cost(outcome)
        env = {q: summary["values"][:, i] for i, q in enumerate(self.quantities)}
        n = len(outcome.ok)
        with np.errstate(all="ignore"):
            gaps = np.column_stack([c.gap(env) for c in self.constraints] + [np.zeros(n)])[:, :-1]
            ratios = np.column_stack([log_ratio(c, env, n) for c in self.constraints]
                                     + [np.zeros(n)])[:, :-1]
        ok = np.isfinite(summary["cost"]) & np.isfinite(gaps).all(axis=1)
        return {**summary, "gaps": gaps, "ratios": ratios, "ok": ok}

    def ask(self, unit: np.ndarray, round_: int) -> None:
        answer = self.evaluations(self.box.to_natural(unit))
        for i, u in enumerate(unit):
            self.unit.append(u)
            self.rounds.append(round_)
            self.answers.append({k: v[i] for k, v in answer.items()})

    def column(self, name: str) -> np.ndarray:
        return np.array([a[name] for a in self.answers])

    def data(self) -> Data:
        """The GPs' data, each constraint on the scale its GP models (modelled())."""
        unit, ok = np.array(self.unit), self.column("ok").astype(bool)
        shape = (len(unit), len(self.constraints))
        gaps = np.array([a["gaps"] for a in self.answers]).reshape(shape)[ok]
        ratios = np.array([a["ratios"] for a in self.answers]).reshape(shape)[ok]
        return Data(unit[ok], self.column("cost")[ok], modelled(gaps, ratios), unit, labels(~ok))

    def feasible(self) -> np.ndarray:
        gaps = np.array([a["gaps"] for a in self.answers]).reshape(len(self.unit), -1)
        return self.column("ok").astype(bool) & (gaps <= 0).all(axis=1)

    def known(self, u: np.ndarray) -> bool:
        return any(np.all(np.abs(u - v) <= SAME) for v in self.unit)


def log_ratio(c: Any, env: dict[str, np.ndarray], n: int) -> np.ndarray:
    """log(left / right) of `left <= right` (log(right / left) of `>=`), where both sides are
    positive, else NaN: positive exactly where the constraint is not met, like the gap, and
    smooth where a positive quantity spans decades (a stress of 36 to 36,000 MPa, b h^2 in
    its denominator) where its gap is not."""
    left, right = (np.broadcast_to(np.asarray(side(env), dtype=float), (n,)) for side in
                   (c.left, c.right))
    ratio = np.where((left > 0) & (right > 0), np.log(np.abs(left)) - np.log(np.abs(right)), np.nan)
    return ratio if c.at_most else -ratio


def search(spec: Any, evaluate: Evaluate, context: Any, seed: np.random.SeedSequence) -> dict[str, Any]:
    """Run the rounds and return the results block."""
    box = make_box(context.varied, context.defaults)
    m = len(box.names)
    initial, most = defaults(spec, m)
    tolerance = spec.tolerance if "tolerance" in spec.model_fields_set else TOLERANCE
    runs = Runs(spec, evaluate, box)
    runs.ask(initial_design(box, min(initial, most), seed), 0)
    converged, message, models, fitted_on, below = False, "", None, -1, False
    with held_to_cores(1):  # small matrices: one BLAS thread is faster, and the same everywhere
        for round_ in range(1, most + 1):
            left = most - len(runs.unit)
            if left <= 0:
                message = f"max_evaluations ({most}) reached"
                break
            rng = np.random.default_rng(child(seed, 1, round_))
            data = runs.data()
            if len(data.objective) < 2:
                models, chosen = None, fill(data.every, min(spec.batch, left), rng)
            else:
                models = fit_models(data, int(child(seed, 2, round_).generate_state(1)[0]), models)
                fitted_on = len(runs.unit)
                chosen, measure = propose(models, min(spec.batch, left), spec.acquisition, rng)
                small = measure < tolerance * spread(data.objective)
                below, was_below = small, below
                if small and was_below:  # twice in a row: once is often a GP too sure of itself
                    converged = True
                    message = (f"the expected improvement ({measure:.3g}) fell below "
                               f"{tolerance:g} x the objective's spread in two rounds running")
                    break
            new = [u for u in dedupe(chosen) if not runs.known(u)]
            if not new:
                converged = True
                message = "the acquisition's best points were all run already"
                break
            runs.ask(np.array(new), round_)
        data = runs.data()
        if len(data.objective) >= 2 and fitted_on != len(runs.unit):
            models = fit_models(data, int(child(seed, 2, 0).generate_state(1)[0]), models)
        return results(spec, runs, models, converged, message, initial, most)


def spread(values: np.ndarray) -> float:
    return float(values.max() - values.min()) if len(values) else 0.0


def dedupe(points: list[np.ndarray]) -> list[np.ndarray]:
    kept: list[np.ndarray] = []
    for u in points:
        if not any(np.all(np.abs(u - v) <= SAME) for v in kept):
            kept.append(u)
    return kept


def results(spec: Any, runs: Runs, models, converged: bool, message: str, initial: int,
            most: int) -> dict[str, Any]:
    from studyrun.analyses.surrogate.fitting import gp_loo, scores
    from studyrun.analyses.surrogate.gp import describe, predict

    box, n = runs.box, len(runs.unit)
    natural = box.to_natural(np.array(runs.unit))
    ok, feasible = runs.column("ok").astype(bool), runs.feasible()
    cost, values = runs.column("cost"), np.array([a["values"] for a in runs.answers])
    notes: list[str] = []
    if feasible.any():  # the best feasible run by the GP's mean, not the luckiest draw
        where = np.flatnonzero(feasible)
        mean = predict(models.objective, np.array(runs.unit)[where]) if models else cost[where]
        best = int(where[np.argmin(mean)])
    elif ok.any():
        gaps = np.array([a["gaps"] for a in runs.answers]).reshape(n, -1)
        best = int(np.flatnonzero(ok)[np.argmin(np.maximum(gaps[ok], 0).sum(axis=1))])
        notes.append("no run met every constraint: the optimum is the run closest to meeting "
                     "them, not a feasible point; widen the box or loosen the constraints")
        converged = False
    else:
        best = 0
        notes.append("every run failed or gave no finite objective: the optimum is no optimum; "
                      "start where the model runs (set the parameters' nominal values)")
        converged = False
    history, so_far = [], math.inf
    for i in range(n):
        so_far = min(so_far, cost[i]) if feasible[i] else so_far
        history.append(finite_or_none(so_far))
    rounds = np.array(runs.rounds)
    progress = [history[int(np.flatnonzero(rounds == r).max())] for r in sorted(set(runs.rounds))]
    surrogate = None
    if models is not None:
        kernel = describe(models.objective.kernel_)
        q2, rmse = scores(models.data.objective, gp_loo(models.objective, models.data.objective))
        surrogate = {**kernel, "length_scales": dict(zip(box.names, kernel["length_scales"])),
                     "q2": finite_or_none(q2), "rmse": finite_or_none(rmse),
                     "samples": len(models.data.objective),
                     "predicted_optimum": finite_or_none(predict(models.objective,
                                                                 np.array(runs.unit)[[best]])[0])}
    env = {q: values[best, i] for i, q in enumerate(runs.quantities)}
    return {
        "method": "bayesian",
        "parameters": {p: {"initial": float(natural[0, j]), "optimum": float(natural[best, j])}
                       for j, p in enumerate(box.names)},
        "objective": {"initial": finite_or_none(cost[0]), "final": finite_or_none(cost[best])},
        "quantities": {q: {"initial": finite_or_none(values[0, i]),
                           "final": finite_or_none(values[best, i])}
                       for i, q in enumerate(runs.quantities)},
        "evaluations": runs.evaluations.runs,
        "batches": runs.evaluations.calls,
        "converged": converged,
        "message": message,
        "terms": [{"kind": k, "quantity": q, "value": v, "weight": spec.weights.get(q, 1.0)}
                  for k, q, v in spec.terms()],
        "progress": progress,
        "notes": notes,
        "acquisition": spec.acquisition,
        "initial": min(initial, most),
        "batch": spec.batch,
        "constraints": list(spec.constraints),
        "constraint_values": {c.text: {"left": finite_or_none(c.left(env)),
                                       "right": finite_or_none(c.right(env)),
                                       "met": bool(feasible[best])
                                       and bool(np.all(c.gap(env) <= 0))}
                              for c in runs.constraints},
        "history": history,
        "surrogate": surrogate,
        "failed": [{"run": i + 1, "round": int(rounds[i]),
                    "parameters": {p: float(natural[i, j]) for j, p in enumerate(box.names)}}
                   for i in np.flatnonzero(~ok)],
        "evaluated": {"parameters": [[float(v) for v in row] for row in natural],
                      "objective": [finite_or_none(c) if o else None for c, o in zip(cost, ok)],
                      "feasible": feasible.tolist(), "round": rounds.tolist()},
    }
