"""NSGA-II and NSGA-III (pymoo) with every generation one batch of runs through the executor and
the run store.

pymoo draws from one generator seeded from the study's seed, so a study started again asks for
the same candidates generation after generation: the runs of the generations done before a kill
are found in the store (by their identity) and only the rest are run. The front at the end is
the same as an uninterrupted study's.

With `scenarios: N` the parameters that have distributions are uncertain: N draws of them (a
Latin hypercube from the seed) are the same for every candidate (common random numbers), and
each candidate of the `bounds` parameters is N runs, its objectives statistics over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from studyrun.analyses.pareto.terms import Constraint, constraint, statistic
from studyrun.analyses.search.batching import Evaluations
from studyrun.analyses.search.fit import Box, make_box
from studyrun.blocks.params import map_unit, sample_unit
from studyrun.core.design import Evaluate, Outcome
from studyrun.core.errors import StudyError
from studyrun.core.numbers import finite_or_none

CONVERGED_CHANGE = 1e-3  # converged: the hypervolume changed by less over the last 5 generations
WINDOW = 5
FAILED = 1e30  # a failed candidate's objectives (pymoo sorts it last by its failed-run constraint)


@dataclass
class Candidates:
    """Every candidate evaluated, in order: objectives (minimisation form), total constraint
    violation, and whether its runs failed."""

    objectives: list[np.ndarray] = field(default_factory=list)
    violation: list[np.ndarray] = field(default_factory=list)
    failed: list[np.ndarray] = field(default_factory=list)

    def add(self, objectives: np.ndarray, violations: np.ndarray) -> None:
        """A batch's objectives and violations (pymoo's G, its last column the failed runs)."""
        self.objectives.append(objectives)
        self.violation.append(violations.sum(axis=1))
        self.failed.append(violations[:, -1] > 0)

    def stacked(self, name: str) -> np.ndarray:
        return np.concatenate(getattr(self, name))


class Problem:
    """The study as a pymoo problem: unit-box candidates in, objectives and violations out."""

    def __init__(self, spec: Any, evaluate: Evaluate, context: Any, seed: np.random.SeedSequence):
        self.robust = spec.scenarios is not None
        levers, uncertain = split_parameters(context.varied, self.robust)
        self.box: Box = make_box(levers, context.defaults)
        self.varied = list(context.varied)
        self.scenarios = draw_scenarios(uncertain, spec.scenarios or 1, seed)
        self.uncertain = list(uncertain)
        self.objectives = [(statistic(text, self.robust), sense) for sense, text in spec.objective_terms()]
        self.constraints: list[Constraint] = [constraint(text, self.robust, i)
                                              for i, text in enumerate(spec.constraints)]
        wanted = [s.quantity for s, _ in self.objectives]
        wanted += [q for c in self.constraints for q in sorted(c.quantities)]
        known = list(context.quantities or {})
        self.quantities = list(dict.fromkeys(wanted + ([] if self.robust else known)))
        self.shown = self.shown_columns()
        self.evaluations = Evaluations(evaluate, self.summarise)
        self.candidates = Candidates()

    def shown_columns(self) -> list[str]:
        """What a front point reports beside its parameters: the quantities of a run, or the
        objectives' and constraints' statistics over a candidate's scenarios."""
        if not self.robust:
            return self.quantities
        texts = [s.text for s, _ in self.objectives]
        texts += [s.text for c in self.constraints for s in c.statistics.values()]
        return list(dict.fromkeys(texts))

    def summarise(self, outcome: Outcome) -> dict[str, np.ndarray]:
        k = len(outcome.ok)
        values = np.column_stack([outcome.values.get(q, np.full(k, np.nan))
                                  for q in self.quantities]) if self.quantities else np.zeros((k, 0))
        ok = np.asarray(outcome.ok, bool) & np.isfinite(values).all(axis=1)
        return {"values": values, "ok": ok}

    def rows(self, natural: np.ndarray) -> np.ndarray:
        """Each candidate's runs, a scenario each, as rows of the varied parameters."""
        n, s = len(natural), len(self.scenarios)
        rows = np.empty((n * s, len(self.varied)))
        for j, name in enumerate(self.varied):
            if name in self.box.names:
                rows[:, j] = np.repeat(natural[:, self.box.names.index(name)], s)
            else:
                rows[:, j] = np.tile(self.scenarios[:, self.uncertain.index(name)], n)
        return rows

    def evaluate(self, unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(F, G) for pymoo: objectives in minimisation form, violations (<= 0 where met) with a
        last column that is 1 for a candidate whose runs failed; every candidate is kept."""
        unit = np.atleast_2d(np.asarray(unit, dtype=float))
        objectives, violations, _ = self.assess(unit)
        self.candidates.add(objectives, violations)
        return objectives, violations

    def shown_values(self, unit: np.ndarray) -> np.ndarray:
        """The values reported beside candidates evaluated before (no run is made again)."""
        return self.assess(np.atleast_2d(unit))[2]

    def assess(self, unit: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Objectives, violations and shown values of unit-box candidates."""
        natural = self.box.to_natural(unit)
        n, s = len(unit), len(self.scenarios)
        answer = self.evaluations(self.rows(natural))
        values = answer["values"].reshape(n, s, len(self.quantities))
        failed = ~answer["ok"].reshape(n, s).all(axis=1)
        column = {q: values[:, :, i] for i, q in enumerate(self.quantities)}
        with np.errstate(all="ignore"):
            stats = {s_.text: s_.over(column[s_.quantity]) for s_, _ in self.objectives}
            env = {q: v.mean(axis=1) for q, v in column.items()}
            for c in self.constraints:
                env |= {name: s_.over(column[s_.quantity]) for name, s_ in c.statistics.items()}
                stats |= {s_.text: env[name] for name, s_ in c.statistics.items()}
            objectives = np.column_stack([stats[s_.text] * (1 if sense == "minimize" else -1)
                                          for s_, sense in self.objectives])
            violations = np.column_stack([c.violation(env) for c in self.constraints] +
                                         [np.zeros(n)])
        failed |= ~np.isfinite(objectives).all(axis=1) | np.isnan(violations).any(axis=1)
        objectives[failed] = FAILED
        violations[failed] = 0.0
        violations[:, -1] = failed.astype(float)
        shown = (np.column_stack([stats[t] for t in self.shown]) if self.robust
                 else values[:, 0, :])
        return objectives, violations, shown


def split_parameters(varied: dict[str, Any], robust: bool) -> tuple[dict, dict]:
    """(decision parameters, uncertain parameters): with scenarios, those with a distribution
    are uncertain; without, every varied parameter is a decision over its box."""
    if not robust:
        return dict(varied), {}
    levers = {n: p for n, p in varied.items() if p.kind == "bounds"}
    return levers, {n: p for n, p in varied.items() if n not in levers}


def draw_scenarios(uncertain: dict[str, Any], count: int, seed: np.random.SeedSequence) -> np.ndarray:
    """`count` draws of the uncertain parameters (a Latin hypercube), natural values."""
    if not uncertain:
        return np.zeros((1, 0))
    return map_unit(uncertain, sample_unit(count, len(uncertain), "lhs", seed.spawn(1)[0]))


def algorithm_for(spec: Any, objectives: int, seed: int):
    """pymoo's NSGA-II or NSGA-III (Das-Dennis reference directions, as many as the population
    holds) for `objectives` objectives."""
    if spec.method == "nsga2":
        from pymoo.algorithms.moo.nsga2 import NSGA2

        return NSGA2(pop_size=spec.population_size, seed=seed)
    from math import comb

    from pymoo.algorithms.moo.nsga3 import NSGA3
    from pymoo.util.ref_dirs import get_reference_directions

    partitions = 1
    while comb(partitions + 1 + objectives - 1, objectives - 1) <= spec.population_size:
        partitions += 1
    directions = get_reference_directions("das-dennis", objectives, n_partitions=partitions)
    return NSGA3(ref_dirs=directions, pop_size=spec.population_size, seed=seed)


def search(spec: Any, evaluate: Evaluate, context: Any, seed: np.random.SeedSequence) -> dict[str, Any]:
    """Run the generations and return the results block."""
    from pymoo.core.problem import Problem as PymooProblem

    scenario_seed, search_seed = seed.spawn(2)
    problem = Problem(spec, evaluate, context, scenario_seed)
    if not problem.box.names:
        raise StudyError("no parameter to optimise: with scenarios, the decisions are the "
                         "parameters given as bounds: [low, high]; the others are uncertain",
                         path="analysis.scenarios")

    class Study(PymooProblem):
        def _evaluate(self, x, out, *args, **kwargs):
            out["F"], out["G"] = problem.evaluate(x)

    m, k = len(problem.box.names), len(problem.objectives)
    algorithm = algorithm_for(spec, k, int(search_seed.generate_state(1)[0]))
    algorithm.setup(Study(n_var=m, n_obj=k, n_ieq_constr=len(problem.constraints) + 1,
                          xl=np.zeros(m), xu=np.ones(m)), termination=("n_gen", spec.generations))
    fronts: list[np.ndarray] = []  # each generation's feasible non-dominated objectives
    while algorithm.has_next():
        algorithm.next()
        fronts.append(feasible_objectives(algorithm.opt))
    return results(spec, problem, algorithm, fronts)


def feasible_objectives(population) -> np.ndarray:
    if population is None or not len(population):
        return np.zeros((0, 0))
    feasible = population.get("FEAS").ravel()
    return population.get("F")[feasible]


def results(spec: Any, problem: Problem, algorithm, fronts: list[np.ndarray]) -> dict[str, Any]:
    from pymoo.indicators.hv import HV

    signs = np.array([1.0 if sense == "minimize" else -1.0 for _, sense in problem.objectives])
    objectives, violation = problem.candidates.stacked("objectives"), problem.candidates.stacked("violation")
    good = violation == 0
    reference = reference_point(spec, problem, objectives[good], signs)
    indicator = HV(ref_point=reference) if reference is not None else None
    hypervolume = [float(indicator(front)) if indicator is not None and len(front) else 0.0
                   for front in fronts]
    change = relative_change(hypervolume)
    final = algorithm.pop
    front = points(problem, algorithm.opt, signs, feasible=True)
    front.sort(key=lambda point: point["objectives"][problem.objectives[0][0].text])
    infeasible = points(problem, final, signs, feasible=False)
    candidates = len(objectives)
    return {
        "method": spec.method,
        "objectives": [{"objective": s.text, "sense": sense} for s, sense in problem.objectives],
        "constraints": list(spec.constraints),
        "pareto": front,
        "infeasible": infeasible,
        "hypervolume": hypervolume,
        "reference": ({s.text: float(r * sign) for (s, _), r, sign in zip(problem.objectives, reference, signs)}
                      if reference is not None else None),
        "hypervolume_change": change,
        "evaluations": problem.evaluations.runs,
        "candidates": candidates,
        "scenarios": len(problem.scenarios) if problem.robust else None,
        "generations": len(fronts),
        "population": spec.population_size,
        "converged": change is not None and abs(change) < CONVERGED_CHANGE,
        "message": (f"{len(fronts)} generations of {spec.population_size} ({candidates} "
                    f"candidates, {problem.evaluations.runs} model runs): {len(front)} points on "
                    f"the front, {len(infeasible)} of the last population infeasible"
                    + ("" if len(front) else "; no candidate met every constraint")),
        "evaluated": {"objectives": [None if gone else (row * signs).tolist() for row, gone
                                     in zip(objectives, problem.candidates.stacked("failed"))],
                      "feasible": good.tolist()},
    }


def reference_point(spec, problem: Problem, feasible: np.ndarray, signs: np.ndarray) -> np.ndarray | None:
    """The hypervolume's reference in minimisation form: the study's `reference`, else the
    worst value of each objective over the feasible candidates."""
    if spec.reference:
        return np.array([spec.reference[s.text] for s, _ in problem.objectives]) * signs
    if not len(feasible):
        return None
    return feasible.max(axis=0)


def relative_change(hypervolume: list[float]) -> float | None:
    """(hv now - hv 5 generations ago) / hv now; None before 6 generations or at 0."""
    if len(hypervolume) <= WINDOW or hypervolume[-1] == 0:
        return None
    return (hypervolume[-1] - hypervolume[-1 - WINDOW]) / hypervolume[-1]


def points(problem: Problem, population, signs: np.ndarray, feasible: bool) -> list[dict[str, Any]]:
    """Members of a population (feasible or not) as parameters, objectives and shown values."""
    if population is None or not len(population):
        return []
    keep = population.get("FEAS").ravel() == feasible
    unit, objectives = population.get("X")[keep], population.get("F")[keep]
    violation = population.get("G")[keep]
    natural = problem.box.to_natural(unit)
    answer = problem.shown_values(unit) if len(unit) else []
    out = []
    for i in range(len(unit)):
        point = {"parameters": {n: float(natural[i, j]) for j, n in enumerate(problem.box.names)},
                 "objectives": {s.text: finite_or_none(objectives[i, o] * signs[o])
                                for o, (s, _) in enumerate(problem.objectives)},
                 "quantities": {name: finite_or_none(v) for name, v in zip(problem.shown, answer[i])}}
        if not feasible:
            point["violation"] = float(violation[i, :-1].sum())
            point["failed"] = bool(violation[i, -1] > 0)
        out.append(point)
    return out
