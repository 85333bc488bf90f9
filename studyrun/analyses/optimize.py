"""Design optimisation (iterative analysis): `analysis: {type: optimize}`.

Finds parameter values within their bounds that minimise an objective made of quantity terms,
as Dakota's optimisation methods do: `minimize: [q...]` adds w*q, `maximize: [q...]` adds -w*q
and `target: {q: value}` adds w*(q - value)^2 (weights w from `weights`, default 1). Starts
from the parameters' nominal values; `nelder-mead` (default; its first simplex as one batch),
`lbfgsb` (`gradient`: the adjoint or forward sensitivities of an equation model in-process, one
run per point, or central differences, 2m + 1 runs per batch) or `differential-evolution` (a
whole population per batch). `nsga2` and `nsga3` (pymoo's NSGA-II and NSGA-III, a generation
per batch) instead trade two or more objectives off (`objectives: {minimize: [...], maximize:
[...]}`) and return their Pareto front, optionally under `constraints` (`travel <= 0.08`); with
`scenarios: N` every candidate is run over the same N draws of the parameters that have
distributions, and the objectives and constraints may be `mean(q)`, `std(q)` or
`percentile(q, p)` over them (robust optimisation). Every run goes through the executor and the
run store, so an optimisation is parallel where it can be, cached and resumable.

With one objective, `results` holds the contract keys `parameters` (name -> `initial`,
`optimum`), `objective` (`initial`, `final`), `quantities` (name -> `initial`, `final`) and
`evaluations` (model runs), and also `method`, `converged`, `message`, `batches`, `terms`,
`progress` (best objective after each batch), for lbfgsb `gradient` (`method` used; in-process:
`gradients` computed, `integrations`, `seconds`) and `notes`; with nsga2 and nsga3 it holds the
front (`pareto`), the hypervolume of each generation and the keys docs/reference/results.md
lists.

Formulas, defaults and edge cases: docs/methods.md, "Optimisation".
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from studyrun.analyses.base import (
    SEARCH_RUN_BYTES,
    IterativeAnalysis,
    search_footprint,
    search_runs,
)
from studyrun.analyses.search.fit import make_box
from studyrun.blocks.params import sample_unit
from studyrun.core.design import Design, Outcome
from studyrun.core.errors import Problem, StudyError
from studyrun.core.numbers import finite_or_none
from studyrun.core.plugin import Example
from studyrun.core.sizes import Footprint
from studyrun.core.text import suggest
from studyrun.results.records import ByName, Flag, Lines, Number, Numbers, Record, Text
from studyrun.results.records import Count as Counted  # optimize's own Count is a positive setting
from studyrun.results.report.markdown import escape, table


class Objectives(BaseModel):
    """`objectives:` of a multi-objective search: quantities (or, with scenarios, statistics of
    them) to make small and to make large."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    minimize: list[str] = Field(default_factory=list, description="quantities to make small")
    maximize: list[str] = Field(default_factory=list, description="quantities to make large")

    @field_validator("minimize", "maximize", mode="before")
    @classmethod
    def _one_name_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


MULTI_OBJECTIVE = ("nsga2", "nsga3")
SORTING_BYTES = 18  # pymoo's sorting of a generation: bytes x population^2 (bench_memory.py)
GP_BYTES = 64  # bayesian: a GP's kernel, its factor and its inverse, 8 bytes each, twice over
BAYESIAN_KEYS = ("initial", "batch", "acquisition")
MOST_BAYESIAN = 5000  # bayesian: the most runs its GPs are fitted on (n^3 each round)

# A count the schema gives as positive but check() enforces, among the checks against the
# quantities: `generations: 0` is then reported with the objectives' mistakes, not alone.
Count = Annotated[int, WithJsonSchema({"type": "integer", "exclusiveMinimum": 0})]


class Optimum(Record):
    """A parameter's start and optimum."""

    initial: Number = None
    optimum: Number = None


class ValueChange(Record):
    """A value at the start and at the optimum."""

    initial: Number = None
    final: Number = None


class OptimizerSurrogate(Record):
    """bayesian: the last GP of the objective, its hyperparameters and leave-one-out scores."""

    type: Text
    nu: Number = None
    signal_variance: Number = None
    length_scales: ByName = {}
    noise_variance: Number = None
    q2: Number = None
    rmse: Number = None
    samples: Counted
    predicted_optimum: Number = None


class FailedRun(Record):
    """bayesian: a run that failed (or gave no finite value), and where it was."""

    run: Counted
    round: Counted
    parameters: ByName


class ConstraintValue(Record):
    """bayesian: a constraint's two sides at the optimum, and whether it holds there."""

    left: Number = None
    right: Number = None
    met: Flag


class OptimizeResults(Record):
    """One objective's optimum, or (nsga2, nsga3) the Pareto front and its hypervolume."""

    method: Text
    parameters: dict[str, Optimum] = {}
    objective: ValueChange | None = None
    quantities: dict[str, ValueChange] = {}
    evaluations: Counted | None = None
    batches: Counted | None = None
    converged: Flag | None = None
    message: Text | None = None
    terms: list[dict[str, Any]] = []
    progress: Numbers = []
    notes: Lines = []
    gradient: dict[str, Any] | None = None
    objectives: list[dict[str, Text]] = []
    constraints: list[Text] = []
    pareto: list[dict[str, Any]] = []  # points: parameters, objectives, quantities
    infeasible: list[dict[str, Any]] = []
    hypervolume: Numbers = []  # a generation each
    reference: ByName = {}
    hypervolume_change: Number = None
    candidates: Counted | None = None
    scenarios: Counted | None = None
    generations: Counted | None = None
    population: Counted | None = None
    evaluated: dict[str, list[Any]] = {}  # objectives, feasible (bayesian: parameters, objective)
    acquisition: Text | None = None  # bayesian: ei | lcb
    initial: Counted | None = None  # bayesian: runs of the first design
    batch: Counted | None = None  # bayesian: runs a round
    constraint_values: dict[str, ConstraintValue] = {}  # bayesian: at the optimum
    history: Numbers = []  # bayesian: best feasible objective after each run
    surrogate: OptimizerSurrogate | None = None  # bayesian: the last GP's hyperparameters, q2
    failed: list[FailedRun] = []  # bayesian


class Optimize(IterativeAnalysis):
    """Minimise a sum of quantity terms over the varied parameters' box."""

    type: Literal["optimize"]
    tutorial = "Optimisation"
    example = Example({"analysis": {"type": "optimize", "target": {"final": 0.5},
                                    "max_evaluations": 30}},
                      failing={"parameters": {"a": {"nominal": 0.9}}},
                      failures="steers")
    results_model = OptimizeResults

    minimize: list[str] = Field(default_factory=list, description="quantities to make small")
    maximize: list[str] = Field(default_factory=list, description="quantities to make large")
    target: dict[str, float] = Field(default_factory=dict,
                                     description="quantity -> value to reach (squared deviation)")
    weights: dict[str, float] = Field(default_factory=dict,
                                      description="quantity -> weight of its term (default 1)")
    method: Literal["nelder-mead", "lbfgsb", "differential-evolution", "bayesian", "nsga2",
                    "nsga3"] = "nelder-mead"
    objectives: Objectives | None = Field(
        None, description="nsga2, nsga3: {minimize: [...], maximize: [...]}, two or more")
    constraints: list[str] = Field(
        default_factory=list, description="bayesian, nsga2, nsga3: inequalities over "
                                          "quantities, e.g. 'travel <= 0.08'")
    reference: dict[str, float] = Field(
        default_factory=dict, description="nsga2, nsga3: objective -> the hypervolume's "
                                          "reference value (default: the worst value seen)")
    scenarios: PositiveInt | None = Field(
        None, description="nsga2, nsga3: robust search: draws of the parameters that have "
                          "distributions, the same for every candidate; objectives may be "
                          "mean(q), std(q), percentile(q, p)")
    multistart: NonNegativeInt = Field(0, description="extra starts from a Latin hypercube, "
                                                      "run side by side; the best one wins")
    max_evaluations: PositiveInt | None = Field(
        None, description="cap on objective evaluations (bayesian: default 20 x parameters + 10)")
    initial: PositiveInt | None = Field(
        None, description="bayesian: runs of the first design, the nominal start and a Latin "
                          "hypercube (default 2 x parameters + 2)")
    batch: PositiveInt = Field(1, description="bayesian: runs chosen together each round, for "
                                              "parallel workers (a constant liar)")
    acquisition: Literal["ei", "lcb"] = Field(
        "ei", description="bayesian: expected improvement or lower confidence bound, times the "
                          "probabilities of meeting the constraints and of not failing")
    tolerance: float = Field(1e-8, gt=0, description="convergence tolerance (bayesian: of the "
                                                    "expected improvement, default 1e-12)")
    step: float = Field(1e-4, gt=0, lt=1, description="lbfgsb: relative finite-difference step")
    gradient: Literal["auto", "adjoint", "forward", "fd"] = Field(
        "auto", description="lbfgsb: the objective's gradient, in-process by the adjoint or the "
                            "forward sensitivities of an ode or stockflow model whose quantities "
                            "are each one reduction of an output, or fd (central differences of "
                            "runs); auto: the adjoint where it applies, else fd")
    generations: Count = Field(100, description="differential-evolution, nsga2, nsga3: "
                                                "generations")
    population: Count | None = Field(
        None, description="differential-evolution: population per parameter (default 15); "
                          "nsga2, nsga3: the whole population (default 100)")

    @property
    def population_size(self) -> int:
        """The population as the method reads it, its default filled in."""
        if self.population is not None:
            return self.population
        return 100 if self.method in MULTI_OBJECTIVE else 15

    def run_count(self, context) -> tuple[int, str]:
        if self.method == "bayesian":
            from studyrun.analyses.bayesian.search import defaults

            return defaults(self, len(context.varied))[1], "max_evaluations"
        if self.method in MULTI_OBJECTIVE:
            return self.population_size * self.generations * (self.scenarios or 1), "generations"
        return search_runs(self, len(context.varied))

    def footprint(self, context) -> Footprint | None:
        """Each run's row and summary; for nsga2 and nsga3 also pymoo's sorting of a generation
        (parents and offspring), SORTING_BYTES x population^2, both at `population`. None for a
        population below 1, which check() refuses."""
        runs, key = self.run_count(context)
        if self.method == "bayesian":
            return Footprint(key, runs, "runs", lambda n: SEARCH_RUN_BYTES * n + GP_BYTES * n * n,
                             f"{SEARCH_RUN_BYTES:,} bytes a run, and the GPs' kernel matrices, "
                             f"{GP_BYTES} bytes x runs^2")
        if self.method not in MULTI_OBJECTIVE:
            return search_footprint((runs, key))
        if self.population_size < 1:
            return None
        each = SEARCH_RUN_BYTES * (runs // self.population_size)  # a candidate's, generations over
        return Footprint("population", self.population_size, "candidates a generation",
                         lambda p: SORTING_BYTES * p * p + each * p,
                         f"pymoo's sorting of a generation, {SORTING_BYTES} bytes x population^2; "
                         f"and {SEARCH_RUN_BYTES:,} bytes a run, {runs // self.population_size:,} "
                         "runs a candidate over the generations", ", or fewer generations")

    @field_validator("minimize", "maximize", mode="before")
    @classmethod
    def _one_name_is_a_list(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check_terms(self) -> "Optimize":
        if self.method in MULTI_OBJECTIVE:
            return self._check_multi_objective()
        for key in ("objectives", "reference", "scenarios"):
            if key in self.model_fields_set:
                raise ValueError(f"{key} applies to method: nsga2 or nsga3 (multi-objective), "
                                 f"not {self.method}")
        if self.method != "bayesian":
            for key in ("constraints", *BAYESIAN_KEYS):
                if key in self.model_fields_set:
                    raise ValueError(f"{key} applies to method: bayesian"
                                     + (", nsga2 or nsga3" if key == "constraints" else "")
                                     + f", not {self.method}")
        elif "multistart" in self.model_fields_set:
            raise ValueError("multistart applies to nelder-mead and lbfgsb, not bayesian: its "
                             "first design already spreads over the box (initial)")
        if not (self.minimize or self.maximize or self.target):
            raise ValueError("give the objective: minimize, maximize (quantity names) or target "
                             "{quantity: value}")
        if "gradient" in self.model_fields_set and self.method != "lbfgsb":
            raise ValueError(f"gradient applies to method: lbfgsb, not {self.method}")
        return self

    def _check_multi_objective(self) -> "Optimize":
        single = [k for k in ("minimize", "maximize", "target", "weights", "multistart",
                              "gradient", "max_evaluations", *BAYESIAN_KEYS)
                  if k in self.model_fields_set]
        if single:
            raise ValueError(f"{', '.join(single)}: not read by method: {self.method}; give the "
                             "objectives as objectives: {minimize: [...], maximize: [...]}")
        return self  # the objectives themselves: check(), with the quantities

    def objective_terms(self) -> list[tuple[str, str]]:
        """(minimize | maximize, objective text) of a multi-objective search, in order."""
        if self.objectives is None:
            return []
        return ([("minimize", t) for t in self.objectives.minimize]
                + [("maximize", t) for t in self.objectives.maximize])

    def terms(self) -> list[tuple[str, str, float | None]]:
        """(kind, quantity, target value) for every term of the objective."""
        return ([("minimize", q, None) for q in self.minimize]
                + [("maximize", q, None) for q in self.maximize]
                + [("target", q, float(v)) for q, v in self.target.items()])

    def warnings(self, context) -> list[str]:
        """A multi-objective search without scenarios searches parameters that have
        distributions as decisions over their box: said, with the key that treats them as
        uncertain instead."""
        drawn = [n for n, p in context.varied.items() if p.kind != "bounds"]
        if self.method not in MULTI_OBJECTIVE or self.scenarios is not None or not drawn:
            return []
        return [f"without scenarios, {self.method} searches every varied parameter as a decision "
                f"over its box, {', '.join(drawn)} too, whose distribution it does not draw from; "
                "give analysis.scenarios: N to treat parameters with distributions as uncertain "
                "(objectives such as mean(q))"]

    def check(self, context) -> list[Problem]:
        """Each term names a quantity of the study; the counts are positive."""
        problems = []
        if self.generations < 1:
            problems.append(Problem(f"must be at least 1, got {self.generations}: the search's "
                                    "generations (default 100)", "generations"))
        if self.method in MULTI_OBJECTIVE:
            from studyrun.analyses.pareto.check import check_multi_objective

            return problems + check_multi_objective(self, context)
        if self.population is not None and self.population < 1:
            problems.append(Problem(f"must be at least 1, got {self.population}: candidates per "
                                    "parameter in each generation (default 15)", "population"))
        known = set(context.quantities) if context.quantities is not None else None
        for kind, name, _ in self.terms():
            if known is not None and name not in known:
                hint = suggest(name, known)
                where = f"target.{name}" if kind == "target" else kind
                problems.append(Problem(f"{name!r} is not a quantity of the study{hint} "
                                        f"(quantities: {', '.join(sorted(known)) or 'none'})", where))
        for name in self.weights:
            if name not in {q for _, q, _ in self.terms()}:
                problems.append(Problem(f"{name!r} has a weight but no term", f"weights.{name}"))
        if self.method == "bayesian":
            from studyrun.analyses.pareto.check import check_constraints

            problems += check_constraints(self.constraints, False, known) + self.check_sizes(context)
        return problems

    def check_sizes(self, context) -> list[Problem]:
        """bayesian: its GPs are fitted on every run each round (n^3), so the runs are capped;
        the first design and a round fit within them."""
        from studyrun.analyses.bayesian.search import defaults

        initial, most = defaults(self, len(context.varied))
        if most > MOST_BAYESIAN:
            return [Problem(f"bayesian fits its GPs on every run, each round (n^3 for n runs): at "
                            f"most {MOST_BAYESIAN}, got {most}; for more runs use "
                            "differential-evolution", "max_evaluations")]
        return [Problem(f"must be at most max_evaluations ({most}), got {value}", key)
                for key, value in (("initial", initial), ("batch", self.batch))
                if key in self.model_fields_set and value > most]

    def design(self, context, seed) -> Design:
        """Only the first run (the nominal start), or bayesian's first design: the optimiser
        plans the rest as it goes."""
        box = make_box(context.varied, context.defaults)
        rows = box.start[None]
        if self.method == "bayesian":
            from studyrun.analyses.bayesian.search import defaults, initial_design

            initial, most = defaults(self, len(box.names))
            rows = box.to_natural(initial_design(box, min(initial, most), seed))
        return Design(box.names, rows, {"iterative": True, "method": self.method})

    def describe_design(self, design: Design, context) -> str:
        if self.method in MULTI_OBJECTIVE:
            from studyrun.analyses.pareto.report import describe_search

            return describe_search(self)
        if self.method == "bayesian":
            from studyrun.analyses.bayesian.report import describe_search as describe_bayesian

            return describe_bayesian(self, design)
        start = ", ".join(f"{k}={v:g}" for k, v in zip(design.names, design.matrix[0]))
        return (f"iterative: {self.method} plans its runs as it goes, starting from {start}; "
                f"objective {describe_objective(self)}")

    def iterate(self, evaluate, context, seed) -> dict[str, Any]:
        if self.method in MULTI_OBJECTIVE:
            from studyrun.analyses.pareto.search import search

            return search(self, evaluate, context, seed)
        if self.method == "bayesian":
            from studyrun.analyses.bayesian.search import search as bayesian

            return bayesian(self, evaluate, context, seed)
        from studyrun.analyses.search.batching import Evaluations, lockstep
        from studyrun.analyses.search.fit import Settings, fit

        box = make_box(context.varied, context.defaults)
        names = [q for _, q, _ in self.terms()]
        quantities = list(dict.fromkeys(names))
        evaluations = Evaluations(evaluate, self.summariser(quantities))
        first = evaluations(box.start[None])
        missing = [q for q in quantities if q not in evaluations.first.values]
        if missing and evaluations.first.ok.any():  # a failed start gives no quantity's name
            raise StudyError(f"{', '.join(map(repr, missing))}: not a quantity of the runs (they "
                             f"give {', '.join(evaluations.first.values) or 'none'}); define it "
                             "under quantities:", path="analysis")
        settings = Settings(method=self.method, max_evaluations=self.max_evaluations,
                            tolerance=self.tolerance, step=self.step, generations=self.generations,
                            population=self.population_size, polish=False)
        notes: list[str] = []
        used = "fd"
        if self.method == "lbfgsb":
            settings.gradient, used, notes = self.model_gradient(context, box.names)
        lhs_seed, evolution_seed = seed.spawn(2)
        starts = [box.start]
        if self.multistart and self.method != "differential-evolution":
            starts += list(box.to_natural(sample_unit(self.multistart, len(box.names), "lhs", lhs_seed)))
        runs = [lambda ask, s=s: self.optimise(ask, s, box, settings, evolution_seed, fit)
                for s in starts]
        results = lockstep(runs, evaluations)
        best = min(results, key=lambda r: r.cost)
        last = evaluations(best.estimate[None])
        found = bool(np.isfinite(last["cost"][0]))
        return {
            "method": self.method,
            "parameters": {n: {"initial": float(box.start[j]), "optimum": float(best.estimate[j])}
                           for j, n in enumerate(box.names)},
            "objective": {"initial": finite_or_none(first["cost"][0]),
                          "final": finite_or_none(last["cost"][0])},
            "quantities": {q: {"initial": finite_or_none(first["values"][0][i]),
                               "final": finite_or_none(last["values"][0][i])}
                           for i, q in enumerate(quantities)},
            "evaluations": evaluations.runs,
            "batches": evaluations.calls,
            "converged": bool(best.converged) and found,
            "message": best.message,
            "terms": [{"kind": k, "quantity": q, "value": v, "weight": self.weights.get(q, 1.0)}
                      for k, q, v in self.terms()],
            "progress": [finite_or_none(p) for p in best.progress],
            **({"gradient": settings.gradient.summary() if settings.gradient is not None
                else {"method": used}} if self.method == "lbfgsb" else {}),
            "notes": notes + ([] if found else [
                "every run the optimiser tried failed or gave no finite objective, the start's "
                "too: the optimum is no optimum; start where the model runs (set the "
                "parameters' nominal values)"]),
        }

    def optimise(self, ask, start, box, settings, seed, fit):
        if self.method != "lbfgsb":
            return fit(ask, start, box, settings, seed)
        return minimise_with_gradients(ask, start, box, settings)

    def model_gradient(self, context, names: list[str]):
        """The in-process gradient of the objective (None: differences), the method used and
        why it is not the one asked for. Each quantity of a term must be one reduction of a
        model output (docs/methods.md, "Adjoint gradients"); the objective is then a weighted
        sum of outputs on the grid, w_q q for minimize, -w_q q for maximize and
        2 w_q (q - target) q at the current point for target."""
        from studyrun.analyses.gradient.objective import parse_objective
        from studyrun.analyses.search.gradients import model_gradient
        from studyrun.models.base import HasEquations

        if self.gradient == "auto" and not isinstance(context.model, HasEquations):
            return None, "fd", []  # differences are this model's default: nothing to say
        objectives, notes = {}, []
        for _, q, _ in self.terms():
            text = (context.quantities or {}).get(q)
            try:
                objectives[q] = parse_objective(str(text))
            except ValueError as error:
                if self.gradient != "fd":
                    notes.append(f"quantity {q!r} ({text}) is not one reduction of one model "
                                 f"output ({error}): central differences used for the gradient")
                return None, "fd", notes
        terms, weights = self.terms(), self.weights

        def weigh(times, ys, answer):
            found = {o.output: np.zeros(len(times)) for o in objectives.values()}
            for kind, q, target in terms:
                objective = objectives[q]
                w = objective.weights(ys[objective.output], times)
                slope = (1.0 if kind == "minimize" else -1.0 if kind == "maximize"
                         else 2 * (w @ ys[objective.output] - target))
                found[objective.output] += weights.get(q, 1.0) * slope * w
            return found

        outputs = list(dict.fromkeys(o.output for o in objectives.values()))
        return model_gradient(self.gradient, context, names, outputs, weigh)

    def summariser(self, quantities: list[str]):
        terms = self.terms()

        def summarise(outcome: Outcome) -> dict[str, np.ndarray]:
            k = len(outcome.ok)
            values = np.column_stack([outcome.values.get(q, np.full(k, np.nan)) for q in quantities])
            objective = np.zeros(k)
            for kind, q, target in terms:
                x, w = values[:, quantities.index(q)], self.weights.get(q, 1.0)
                objective += w * (x if kind == "minimize" else -x if kind == "maximize"
                                  else (x - target) ** 2)
            ok = np.asarray(outcome.ok, bool) & np.isfinite(objective)
            return {"cost": np.where(ok, objective, np.inf), "values": values}
        return summarise

    def report(self, analysis, outcome, figures) -> str:
        if self.method in MULTI_OBJECTIVE:
            from studyrun.analyses.pareto.report import report

            return report(analysis["results"], figures)
        if self.method == "bayesian":
            from studyrun.analyses.bayesian.report import report as bayesian

            return bayesian(analysis["results"], describe_objective(self), figures)
        r = analysis["results"]
        lines = [f"## Optimization ({escape(r['method'])})", "",
                 f"Objective: {escape(describe_objective(self))}. "
                 f"{'Converged' if r['converged'] else 'Stopped'}: "
                 f"{escape(str(r['message']).rstrip('.'))}; {escape(r['evaluations'])} model runs "
                 f"in {escape(r['batches'])} batches.", "",
                 *(f"*{escape(note)}*\n" for note in r.get("notes", [])), *optimum_tables(r)]
        progress = [p for p in r.get("progress", []) if p is not None]
        if len(progress) > 1:
            fig, ax = figures.new()
            ax.plot(np.arange(1, len(progress) + 1), progress)
            ax.set(xlabel="batch of model runs", ylabel="best objective so far",
                   title="Optimizer progress")
            lines += [figures.save(fig, "optimize-progress", "Best objective after each batch"), ""]
        return "\n".join(lines)


def describe_objective(spec: Optimize) -> str:
    parts = []
    for kind, q, v in spec.terms():
        w = spec.weights.get(q, 1.0)
        scale = "" if w == 1 else f"{w:g}*"
        parts.append(f"+ {scale}{q}" if kind == "minimize" else f"- {scale}{q}"
                     if kind == "maximize" else f"+ {scale}({q} - {v:g})^2")
    return "minimise " + " ".join(parts).lstrip("+ ")


def minimise_with_gradients(ask, start, box, settings):
    """L-BFGS-B in the unit box with the model's own gradient (`settings.gradient`), or with
    central-difference gradients, 2m + 1 runs per batch."""
    from studyrun.analyses.search.fit import Recording, minimise_lbfgsb, model_gradient, steps

    record = Recording(ask)
    m = len(start)

    def cost_and_gradient(p):
        h = steps(p, box, settings.step)
        inside = (p - h >= box.lo) & (p - h <= box.hi)  # h points into the box (steps())
        back = np.where(inside, p - h, p)  # central where the box allows, else forward
        rows = [p] + [p + np.eye(m)[j] * h[j] for j in range(m)]
        rows += [np.where(np.arange(m) == j, back, p) for j in range(m)]
        costs = record(np.vstack(rows))["cost"]
        if not np.isfinite(costs[0]):
            return 1e300, np.zeros(m)
        forward, backward = costs[1:m + 1], costs[m + 1:]
        grad = (forward - backward) / (p + h - back)
        grad = np.where(np.isfinite(grad), grad, 0.0)
        return float(costs[0]), grad * (box.hi - box.lo)

    if settings.gradient is not None:
        cost_and_gradient = model_gradient(record, box, settings.gradient)
    result = minimise_lbfgsb(cost_and_gradient, record, start, box, settings)
    result.progress = record.progress
    return result


def optimum_tables(r: dict[str, Any]) -> list[str]:
    """The report's tables of a single-objective optimum: each parameter from its start to the
    optimum, and the objective and quantities from the start to the end."""
    return [table(["parameter", "initial", "optimum"],
                  [[n, p["initial"], p["optimum"]] for n, p in r["parameters"].items()]), "",
            table(["", "initial", "final"],
                  [["objective", r["objective"]["initial"], r["objective"]["final"]]]
                  + [[q, v["initial"], v["final"]] for q, v in r["quantities"].items()]), ""]
