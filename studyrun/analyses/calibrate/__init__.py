"""Calibration against observed data (iterative analysis): `analysis: {type: calibrate}`.

Fits the study's varied parameters to observed data by minimising FME's modCost (Soetaert &
Petzoldt, Inverse modelling, sensitivity and Monte Carlo analysis in R using package FME, J. Stat.
Softw. 33, 2010; docs/methods.md, "The cost of a model against data"), starting from the
parameters' nominal values within their bounds. Every model evaluation goes through the study's
executor and run store, batched: whole Jacobians, whole populations and the starts of a
multistart fit run as one batch each.

Modules: data.py (reading the CSV files), cost.py (modCost), batching.py (one round trip per
batch, fits in lockstep), fit.py (the optimisers and the statistics of FME's modFit), gradient.py
(docs/methods.md, "Gradient matching"), mcmc.py (adaptive Metropolis with delayed rejection,
FME's modMCMC), sequential.py (`start` and `pseudo_data`: docs/methods.md, "Sequential
identification"), calibration.py (the workflow and the results block), report.py.

`results` holds the contract keys `parameters` (name -> `initial`, `estimate`, `std_error`, `t`,
`p`, `lower`, `upper` (95% confidence limits from Student's t)), `correlation` (name -> name ->
value), `cost` (`initial`, `final`), `variables` (name -> `N`, `SSR`, `SSR_unweighted`, `scale`,
`rms_before`, `rms_after`; rms = sqrt(SSR_unweighted / N), in the variable's units), `minlogp`
(at the estimate), `converged` and `message`; and also `method`, `minlogp_initial`,
`covariance`, `df`, `residual_variance` (s^2), `evaluations` (`runs`, `batches`), `fitted`
(name -> estimate), `fitted_yaml` (a `parameters:` block with each nominal set to its estimate,
to paste into the study), `starts` (multistart), `progress` (best cost after each batch),
`curves` (output -> `time`, `initial`, `final` model series), `outputs` (variable -> the model
output it is compared with), `residuals` (FME's table at the estimate, also written to
residuals.csv), `fitted_series` (`time`, `series`: output -> the fitted run's series, every
output the model declares; `data_span`: the x range of the data; also written to fitted.csv),
`notes`, with `start` (`folder`, `study`, `study_yaml_sha256`, `parameters`: name -> `value`,
`from`; `pseudo_data`: output -> `points`, `time`; `notes`) for a sequential fit, and for those
methods `gradient_matching` (`estimate`, `cost`,
`objective` (the documented sum of squared scaled slope mismatches at `estimate`),
`integrations`, `refine_integrations`, `collocation_points`, `outer_iterations`,
`observed_states`, `hidden_states`, `settled`, `from_data_at_start` (parameter -> the observed
states whose smoothed value at the model's start gave it: those that only set initial states))
or `mcmc` (`intervals`: name -> `mean`, `sd`, `lower`, `median`, `upper` (2.5/50/97.5%),
`rhat`; `acceptance_rate`, `acceptance_by_chain`,
`error_variance`, `sigma2`, `trace` (every `thin`-th iteration, also in mcmc-samples.csv),
`prediction` (output -> `time`, `lower`, `median`, `upper`), `runs`, `iterations`, `burnin`,
`chains`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    model_validator,
)

from studyrun.analyses.base import (
    SEARCH_RUN_BYTES,
    IterativeAnalysis,
    StudyContext,
    search_footprint,
    search_runs,
)
from studyrun.analyses.calibrate.data import (
    DataBlock,
    Observations,
    check_against_model,
    outputs_needed,
    read_blocks,
)
from studyrun.analyses.calibrate.records import CalibrateResults
from studyrun.analyses.calibrate.sequential import Start
from studyrun.core.design import Design
from studyrun.core.errors import Problem, StudyError
from studyrun.core.plugin import Example
from studyrun.core.sizes import Footprint

if TYPE_CHECKING:
    from studyrun.results.report.figures import Figures

__all__ = ["Calibrate", "DataBlock", "Mcmc", "Start"]

MCMC_RUN_BYTES = 4500  # bytes a run of MCMC (benchmarks/bench_memory.py)
FIT_METHODS = ("lm", "trf", "nelder-mead", "lbfgsb", "differential-evolution")


# The example's data (studyrun.testing): the toy model's y at a = 0.5, b = 0.3.
OBSERVED = ("name,time,value\ny,0,0.8\ny,0.5,0.730353988213\ny,1,0.670409110341\n"
            "y,1.5,0.618814075811\ny,2,0.574405818047\n")


class Mcmc(BaseModel):
    """`method: mcmc`: adaptive Metropolis with delayed rejection, started from a fit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    iterations: PositiveInt = Field(1000, description="iterations per chain, burn-in included")
    burnin: NonNegativeInt = Field(250, description="iterations dropped at the start of each chain")
    chains: PositiveInt = Field(4, description="chains run side by side (their proposals form "
                                               "one batch per iteration)")
    update_cov: NonNegativeInt = Field(
        100, description="adapt the proposal covariance every this many iterations from the "
                         "samples so far (0: never)")
    delayed_rejection: bool = Field(True, description="after a rejection, try once more with a "
                                                      "jump dr_scale times shorter")
    dr_scale: float = Field(3.0, gt=1, description="how much shorter the second jump is")
    error_variance: Literal["auto", "fixed", "sample"] = Field(
        "auto", description="fixed: the errors are the data's (likelihood exp(-cost/2)); sample: "
                            "each variable's error variance is sampled too (Gibbs, inverse gamma "
                            "prior centred on the fit's, weight wvar0); auto: fixed when every "
                            "data block has an err column")
    wvar0: float = Field(0.1, ge=0, description="weight of the prior error variance")
    prediction_draws: PositiveInt = Field(100, description="posterior draws run for the "
                                                           "prediction band")

    @model_validator(mode="after")
    def _check_burnin(self) -> "Mcmc":
        if self.burnin >= self.iterations:
            raise ValueError(f"burnin ({self.burnin}) must be below iterations ({self.iterations})")
        return self


class Calibrate(IterativeAnalysis):
    """Fit the varied parameters to observed data; see the module doc for the results keys."""

    type: Literal["calibrate"]
    tutorial = "Calibration"
    example = Example({"analysis": {"type": "calibrate", "data": {"file": "observed.csv"},
                                    "max_evaluations": 60}},
                      files={"observed.csv": OBSERVED},
                      failing={"parameters": {"a": {"nominal": 0.9}}}, failures="steers")
    results_files = ("residuals.csv", "fitted.csv", "mcmc-samples.csv")
    results_model = CalibrateResults
    reads_series_quantities: ClassVar[bool] = True  # the fitted run's, for fitted_series

    data: DataBlock | list[DataBlock] = Field(
        description="observed data: one block or a list of blocks (one per file); their costs add up")
    method: Literal["lm", "trf", "nelder-mead", "lbfgsb", "differential-evolution",
                    "gradient-matching", "mcmc"] = Field(
        "lm", description="lm (Levenberg-Marquardt) | trf (trust region) | nelder-mead | lbfgsb | "
                          "differential-evolution | gradient-matching (equation models) | mcmc")
    multistart: NonNegativeInt = Field(0, description="extra fits from Latin hypercube starts in "
                                                      "the bounds; the best one wins")
    max_evaluations: PositiveInt | None = Field(None, description="cap on the optimiser's "
                                                                  "function evaluations")
    tolerance: float = Field(1e-8, gt=0, description="convergence tolerance of the optimiser")
    jacobian: Literal["forward", "central", "exact"] = Field(
        "forward", description="finite differences (their rows one batch), or exact: the forward "
                               "sensitivity equations of an ode or stockflow model")
    step: float = Field(1e-4, gt=0, lt=1, description="relative finite-difference step")
    gradient: Literal["auto", "adjoint", "forward", "fd"] = Field(
        "auto", description="lbfgsb: the cost's gradient, in-process by the adjoint or the forward "
                            "sensitivities of an ode or stockflow model, or fd (2 J^T r with the "
                            "Jacobian of `jacobian`); auto: the adjoint where it applies, else fd")
    generations: PositiveInt = Field(100, description="differential-evolution: generations")
    population: PositiveInt = Field(15, description="differential-evolution: population per parameter")
    polish: bool = Field(True, description="differential-evolution: finish with a trf fit")
    refine: bool = Field(False, description="gradient-matching: follow with a trajectory fit")
    fit: Literal["lm", "trf"] = Field("lm", description="the trajectory fit of refine and mcmc")
    mcmc: Mcmc = Field(default_factory=Mcmc, description="method: mcmc settings")
    start: Start | None = Field(None, description="start from an earlier calibration's results "
                                                  "folder: its estimates of shared parameters")
    pseudo_data: list[str] = Field(
        default_factory=list, description="outputs the data lack, fitted to the earlier "
                                          "calibration's fitted series (needs start)")

    @model_validator(mode="after")
    def _gradient_for_lbfgsb(self) -> "Calibrate":
        if "gradient" in self.model_fields_set and self.method != "lbfgsb":
            raise ValueError(f"gradient applies to method: lbfgsb, not {self.method}")
        return self

    def run_count(self, context: StudyContext) -> tuple[int, str]:
        counts = [search_runs(self, len(context.varied))]
        if self.method == "mcmc":
            counts.append((self.mcmc.chains * self.mcmc.iterations, "mcmc.iterations"))
        return max(counts)

    def footprint(self, context: StudyContext) -> Footprint:
        """Each run's row and cost pieces; an MCMC run, MCMC_RUN_BYTES (each iteration's batch
        of the chains' proposals adds its own record)."""
        each = MCMC_RUN_BYTES if self.method == "mcmc" else SEARCH_RUN_BYTES
        return search_footprint(self.run_count(context), each)

    @property
    def blocks(self) -> list[DataBlock]:
        return self.data if isinstance(self.data, list) else [self.data]

    def observations(self, context: StudyContext) -> list[Observations]:
        """The data blocks read, their files relative to the study's folder (read again only
        when a file changed), then the pseudo-data block of a sequential fit."""
        from studyrun.analyses.calibrate.sequential import pseudo_observations

        data = read_blocks(self.blocks, context.folder)
        return data + pseudo_observations(self, context, len(data))

    def needs_series(self, context: StudyContext) -> list[str]:
        """The outputs the data observe, then every other output the model is known to have:
        the fitted run's are kept for a later sequential fit (`fitted_series`), and gradient
        matching fits the trajectories of the states the data do not observe."""
        try:
            needed = outputs_needed(self.observations(context))
        except StudyError:  # `studyrun report DIR` reads the study copy, away from its data;
            return []       # a run checks the data before it asks (check())
        try:
            known = sorted(context.model.output_names() or [])
        except StudyError:  # an invalid model: its own check reports it
            known = []
        return needed + [o for o in known if o not in needed]

    def series_grid(self, context: StudyContext):
        """Runs whose grids differ are compared at the observation times."""
        import numpy as np

        try:
            data = self.observations(context)
        except StudyError:
            return None
        return np.unique(np.concatenate([np.asarray(v.x, dtype=float)
                                         for obs in data for v in obs.variables]))

    def check(self, context: StudyContext) -> list[Problem]:
        """Discrete parameters and missing data files; then the observed variables against the
        model's outputs and time span (when the model spec tells them; otherwise after the first
        run), and what gradient matching needs of the model."""
        problems = []
        for name, p in context.varied.items():
            if getattr(p, "kind", "") == "discrete":
                problems.append(Problem(f"calibrate fits continuous parameters; {name!r} is "
                                        "discrete (fix it, or give it bounds)", ""))
        missing = []
        for i, block in enumerate(self.blocks):
            if not context.path(block.file).is_file():
                where = f"data[{i}].file" if isinstance(self.data, list) else "data.file"
                missing.append(Problem(f"data file not found: {context.path(block.file)}", where))
        if missing:
            return problems + missing
        if self.start is not None or self.pseudo_data:
            from studyrun.analyses.calibrate.sequential import start_problems

            started = start_problems(self, context)
            if started:
                return problems + started
        data = self.observations(context)  # CSV mistakes are StudyErrors at the file's line and column
        time = getattr(context.model, "time", None)
        span = (float(time.start), float(time.stop)) if time is not None else None
        check_against_model(data, context.model.output_names(), span)
        return problems + (self.gradient_problems(context) if self.method == "gradient-matching"
                           else [])

    def gradient_problems(self, context: StudyContext) -> list[Problem]:
        """Gradient matching reads an equation model's right-hand side, and takes the parameters
        that only set initial states from the data at the model's start."""
        from studyrun.analyses.calibrate.gradient import initial_state_problems
        from studyrun.models.base import HasEquations

        if not isinstance(context.model, HasEquations):
            return [Problem("gradient matching evaluates the model's right-hand side: it needs an "
                            "ode or stockflow model (use lm or trf)", "method")]
        try:
            return initial_state_problems(context.model.to_system(), list(context.varied),
                                          self.observations(context))
        except StudyError:  # an invalid model: its own check reports it
            return []

    def design(self, context: StudyContext, seed) -> Design:
        """Only the first run (the nominal start): the optimiser plans the rest as it goes."""
        from studyrun.analyses.calibrate.sequential import start_box

        box, _ = start_box(self, context)
        return Design(box.names, box.start[None], {"iterative": True, "method": self.method})

    def describe_design(self, design: Design, context: StudyContext) -> str:
        """What `studyrun plan` says of an iterative fit."""
        data = self.observations(context)
        n = sum(len(v.x) for obs in data for v in obs.variables)
        names = ", ".join(dict.fromkeys(v.label for obs in data for v in obs.variables))
        start = ", ".join(f"{k}={v:g}" for k, v in zip(design.names, design.matrix[0]))
        return (f"iterative: the {self.method} fit plans its runs as it goes, starting from "
                f"{start}; {n} observations of {names} in {len(data)} data file(s)")

    def iterate(self, evaluate, context: StudyContext, seed) -> dict[str, Any]:
        from studyrun.analyses.calibrate.calibration import calibrate

        return calibrate(self, evaluate, context, seed)

    def provenance(self, context: StudyContext) -> dict[str, Any]:
        """`builds_on`: the earlier calibration this one started from, and its own chain."""
        from studyrun.analyses.calibrate.sequential import read_earlier

        return {} if self.start is None else {
            "builds_on": read_earlier(self.start, context).provenance()}

    def report(self, analysis: dict[str, Any], outcome, figures: "Figures") -> str:
        from studyrun.analyses.calibrate.report import report

        return report(self, analysis, figures)
