"""Design of experiments and response surfaces (plan and analyse steps): `analysis: {type: doe}`.

Plans a coded design with pydoe (designs.py), fits a polynomial surface in coded units with
statsmodels OLS (surface.py), reads main effects, interaction tables and the Pareto front off the
runs (interpret.py) and writes the report section (report.py). Follows Montgomery, Design and
Analysis of Experiments, and Myers, Montgomery & Anderson-Cook, Response Surface Methodology.

`results.<quantity>` holds the contract keys `r2`, `adj_r2`, `rmse` (root mean square of the
residuals, sqrt(SSR/n)), `coefficients` (term -> estimate, std_error, t, p; coded units) and
`dropped_terms`, and also: `terms` (the fitted terms, in `covariance` order), `covariance`,
`sigma` (residual standard error, sqrt(SSR/df_resid)), `df_resid`, `n_runs`, `dropped_runs`
(failed runs left out), `dropped_aliases`,
`anova`, `lack_of_fit`, `residuals`, `main_effects`, `interactions`, `stationary_point`
(quadratic fits), `coding` (parameter -> symbol, center, half_range) and `notes`. With a
`pareto:` block, `results._pareto` holds `senses`, `runs`, `values` and `parameters`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import ConfigDict, Field, field_validator, model_validator

from studyrun.analyses.base import StudyContext, run_bytes
from studyrun.analyses.doe.augment import earlier_folder, earlier_problems, grow, read_earlier
from studyrun.analyses.doe.designs import build_design, coded_matrix, describe_design
from studyrun.analyses.doe.interpret import (
    build_pareto,
    compute_interactions,
    compute_main_effects,
    rank_factors,
)
from studyrun.analyses.doe.records import DoeResults
from studyrun.analyses.doe.surface import find_stationary_point, fit_surface, predict
from studyrun.analyses.doe.terms import read_coding, select_terms, to_coded
from studyrun.analyses.given import ReadsGiven, read_given
from studyrun.core.design import Design, Outcome
from studyrun.core.errors import Problem, StudyError
from studyrun.core.plugin import Example
from studyrun.core.sizes import Footprint

if TYPE_CHECKING:
    from studyrun.analyses.given import GivenRows
    from studyrun.results.report.figures import Figures

__all__ = ["Doe", "coded_matrix", "describe_design", "predict"]

_TERM = r"(?:[A-Za-z_][A-Za-z0-9_]*(?:\^[0-9]+)?)"
_FORMULA = re.compile(rf"^\s*(?:1|{_TERM}(?:\s*\*\s*{_TERM})*)(?:\s*\+\s*(?:1|{_TERM}(?:\s*\*\s*{_TERM})*))*\s*$")
FIT_BYTES = 64  # the fit of a quantity: bytes x runs x terms (benchmarks/bench_memory.py)
_DEFAULT_RESPONSE = {"full": "interaction", "fractional": "linear", "plackett_burman": "linear",
                     "ccd": "quadratic", "bbd": "quadratic", "lhs": "quadratic", "csv": "quadratic",
                     "given": "quadratic"}


class Doe(ReadsGiven):
    """`analysis: {type: doe}`: a designed set of runs and a response-surface fit per quantity."""

    type: Literal["doe"]
    tutorial = "Designed experiments"
    example = Example({"analysis": {"type": "doe", "design": "full", "levels": 3}},
                      failing={})
    predicts = "studyrun.analyses.doe.surface:predict"
    results_model = DoeResults
    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              frozen=True)

    # YAML `design:`; named `kind` here because `design()` is the plug-in method
    kind: Literal["full", "fractional", "plackett_burman", "ccd", "bbd", "lhs", "csv",
                  "given"] = Field(
        "ccd", alias="design", description="full factorial, 2^(k-p) fraction, Plackett-Burman, "
        "central composite, Box-Behnken, maximin Latin hypercube, a CSV file of runs to make, or "
        "given: the runs that exist in `from:` (a CSV or results folder), not run again")
    levels: int | dict[str, int] = Field(
        2, description="full factorial levels: one number, or parameter -> levels (others 2)")
    resolution: int | None = Field(
        None, ge=3, le=8, description="fractional: smallest fraction of at least this resolution "
                                      "(default IV for a linear response, V otherwise)")
    generators: str | None = Field(
        None, description="fractional: pydoe generator string, one word per parameter in order, "
                          "e.g. 'a b c ab ac' (d = ab, e = ac)")
    alpha: Literal["face", "rotatable", "orthogonal"] | None = Field(
        None, description="ccd axial distance (default face); rotatable and orthogonal designs "
                          "are inscribed so every run stays inside the bounds")
    center: int | None = Field(
        None, ge=0, description="center points for ccd and bbd (default 1; replicate them for a "
                                "lack-of-fit test on a stochastic model)")
    samples: int | None = Field(None, ge=2, description="lhs: number of runs (default 10 per parameter)")
    file: str | None = Field(None, description="csv: design file, one column per parameter in "
                                               "natural units, one row per run")
    response: str | None = Field(
        None, description="linear | interaction | quadratic, or a formula of terms such as "
                          "'x1 + x2 + x1*x2 + x1^2' (parameter names allowed); default quadratic "
                          "for ccd, bbd, lhs and csv, interaction for full, linear for fractions")
    pareto: dict[str, Literal["min", "max"]] | None = Field(
        None, description="quantity -> min | max: report the non-dominated runs")
    from_: str | None = Field(
        None, alias="from", description="augment: an earlier doe study's results folder (relative "
                                        "to the study file) whose design grows; its runs are "
                                        "reused where the model is unchanged. design: given: a "
                                        "CSV of runs or a results folder, analysed without "
                                        "running the model")
    augment: Literal["foldover", "ccd", "lhs"] | None = Field(
        None, description="grow the design of `from`: its fold-over (every sign reversed), 2k "
                          "axial and `center` centre points into a central composite design, or "
                          "`samples` more Latin hypercube points (default as many as it has)")

    @field_validator("levels")
    @classmethod
    def _check_levels(cls, value: int | dict[str, int]) -> int | dict[str, int]:
        counts = value.values() if isinstance(value, dict) else [value]
        if any(c < 2 for c in counts):
            raise ValueError(f"levels must be at least 2; got {value}")
        return value

    @field_validator("response")
    @classmethod
    def _check_response(cls, value: str | None) -> str | None:
        if value is None or value in ("linear", "interaction", "quadratic") or _FORMULA.match(value):
            return value
        raise ValueError(f"response must be linear, interaction, quadratic or a formula such as "
                         f"'x1 + x2 + x1*x2 + x1^2'; got {value!r}")

    @model_validator(mode="after")
    def _check_keys_fit_design(self) -> "Doe":
        if (self.kind == "given") != (self.from_ is not None and self.augment is None):
            raise ValueError("from goes with design: given (the runs that exist there, a CSV or "
                             "a results folder, analysed) or with augment (an earlier doe "
                             "study's design, grown); design: given needs from and no augment")
        if self.augment is not None and self.from_ is None:
            raise ValueError("augment and from go together: from names an earlier doe study's "
                             "results folder, augment how its design grows (foldover | ccd | lhs)")
        if self.augment is not None:
            return self._check_augment()
        misplaced = {"samples": "lhs", "file": "csv", "resolution": "fractional",
                     "generators": "fractional", "alpha": "ccd"}
        for key, design in misplaced.items():
            if getattr(self, key) is not None and self.kind != design:
                raise ValueError(f"{key} applies to design: {design}, not {self.kind}")
        if self.center is not None and self.kind not in ("ccd", "bbd"):
            raise ValueError(f"center applies to design: ccd or bbd, not {self.kind}")
        if self.kind == "csv" and not self.file:
            raise ValueError("design: csv needs file: (a CSV with one column per parameter)")
        if self.resolution is not None and self.generators is not None:
            raise ValueError("give either resolution or generators, not both")
        if isinstance(self.levels, dict) and not self.levels:
            raise ValueError("levels mapping is empty")
        return self

    def _check_augment(self) -> "Doe":
        own = {"foldover": set(), "ccd": {"alpha", "center"}, "lhs": {"samples"}}[self.augment]
        keys = {"kind": "design", "levels": "levels", "resolution": "resolution",
                "generators": "generators", "file": "file", "alpha": "alpha", "center": "center",
                "samples": "samples"}
        foreign = [keys[k] for k in keys if k in self.model_fields_set and keys[k] not in own]
        if foreign:
            raise ValueError(f"{', '.join(foreign)} do not apply with augment: {self.augment} (the "
                             "design is the earlier folder's, grown; "
                             f"{', '.join(sorted(own)) or 'no key'} may be given)")
        if self.alpha not in (None, "face"):
            raise ValueError("augment: ccd adds its axial points on the bounds (alpha: face): the "
                             "earlier factorial points sit on them already, so rotatable or "
                             "orthogonal axial points would leave the parameters' bounds")
        return self

    @property
    def design_kind(self) -> str:
        """The design's type: `design`, or what `augment` grows the earlier design into."""
        grown = {"foldover": "fractional", "ccd": "ccd", "lhs": "lhs"}
        return grown[self.augment] if self.augment else self.kind

    def response_model(self) -> str:
        """The requested response: the user's, or the design's usual one."""
        if self.response:
            return self.response
        if self.kind == "full" and not self.augment and (
                self.levels if isinstance(self.levels, int)
                else max(self.levels.values(), default=2)) > 2:
            return "quadratic"
        return _DEFAULT_RESPONSE[self.design_kind]

    def check(self, context: StudyContext) -> list[Problem]:
        """Problems that need the varied parameters: their number, bounds and the keys naming them."""
        parameters = context.varied
        problems = ReadsGiven.check(self, context) if self.kind == "given" else []
        try:
            read_coding(list(parameters), parameters)
        except StudyError as error:
            problems += [Problem(f"{p.path.removeprefix('parameters.')}: {p.message}", path="design")
                         for p in error.problems]
        least = {"fractional": 2, "plackett_burman": 2, "ccd": 2, "bbd": 3}.get(self.design_kind, 1)
        if len(parameters) < least:
            problems.append(Problem(f"design {self.design_kind} needs at least {least} varied "
                                    f"parameters; got {len(parameters)}",
                                    path="augment" if self.augment else "design"))
        if self.augment and not problems and not self.check_size(context):
            problems += earlier_problems(self, context)  # it grows the design: sizes checked first
        if isinstance(self.levels, dict):
            unknown = sorted(set(self.levels) - set(parameters))
            if unknown:
                problems.append(Problem(f"levels names parameters that are not varied: {unknown}; "
                                        f"varied: {list(parameters)}", path="levels"))
        if self.generators and len(self.generators.split()) != len(parameters):
            problems.append(Problem(f"generators must have one word per varied parameter "
                                    f"({len(parameters)}, letters a, b, ... in order); got "
                                    f"{len(self.generators.split())}", path="generators"))
        if self.response and self.response not in ("linear", "interaction", "quadratic"):
            try:
                select_terms(self.response, list(parameters))
            except StudyError as error:
                problems += [Problem(p.message, path="response") for p in error.problems]
        return problems

    def run_count(self, context: StudyContext) -> tuple[int, str] | None:
        """The runs a user's number sets: a full factorial's levels, lhs samples, centre points."""
        parameters = context.varied
        if self.augment:
            if self.samples:
                return self.samples, "samples"
            return (self.center, "center") if self.augment == "ccd" and self.center else None
        if self.kind == "full":
            levels = self.levels if isinstance(self.levels, dict) else {}
            default = self.levels if isinstance(self.levels, int) else 2
            return math.prod(levels.get(name, default) for name in parameters), "levels"
        if self.kind == "lhs":
            return self.samples or 10 * len(parameters), "samples"
        if self.kind in ("ccd", "bbd") and self.center is not None:
            return self.center, "center"
        return None

    def footprint(self, context: StudyContext) -> Footprint | None:
        """The runs and the response surface's fit, FIT_BYTES x runs x terms (statsmodels' least
        squares and the partial sums of squares of each term); a Latin hypercube's maximin
        search, 8 bytes x samples^2. Runs a design's type sets are counted at least."""
        count = (self.run_count(context) if self.augment else  # ccd's and bbd's: centre points
                 least_runs(self.kind, len(context.varied), self.center) or self.run_count(context))
        try:
            terms = term_count(self.response_model(), list(context.varied))
        except StudyError:  # check() says what is wrong with the formula
            return None
        if count is None:
            return None
        runs, key = count
        lower = "" if key != "design" else "use a smaller design, or vary fewer parameters"
        each = run_bytes(context) + FIT_BYTES * terms
        if self.design_kind == "lhs":
            return Footprint(key, runs, "runs", lambda n: each * n + 8 * n * n,
                             f"the maximin Latin hypercube's distances, 8 bytes x runs^2, and "
                             f"{each:,} bytes a run, the fit of {terms:,} terms with the design")
        return Footprint(key, runs, "runs", lambda n: each * n, f"{each:,} bytes a run: the "
                         f"design and its fit of {terms:,} terms", ", or a smaller response",
                         lower=lower)

    def describe_design(self, design: Design, context: StudyContext) -> str:
        """`studyrun plan`: the design in coded and natural units, with a fraction's aliases."""
        return describe_design(design)

    def design(self, context: StudyContext, seed: np.random.SeedSequence) -> Design:
        """The coded design mapped onto the parameters' bounds (a design file's path relative to
        the study's folder)."""
        if self.augment:
            design = grow(self, context, seed)
            design.info["response"] = self.response_model()
            return design
        rows = self.given(context)
        update = {"response": self.response_model()}
        if self.file is not None:
            update["file"] = str(context.path(self.file))
        spec = self.model_copy(update=update)
        design = build_design(spec, context.varied, seed, None if rows is None else rows.inputs)
        if rows is not None:
            design.info["given"] = str(rows.path)
        design.info["response"] = spec.response
        return design

    def given(self, context: StudyContext) -> "GivenRows | None":
        """With design: given, the rows `from:` names (with augment, `from:` is a design to grow)."""
        return read_given(self.from_, context) if self.kind == "given" and self.from_ else None

    def earlier_results(self, context: StudyContext) -> Path | None:
        """The results folder whose runs a grown design starts with."""
        return earlier_folder(self.from_, context) if self.augment and self.from_ else None

    def provenance(self, context: StudyContext) -> dict[str, Any]:
        """A grown design rests on the earlier study's results; a given one on its rows."""
        if self.kind == "given":
            return ReadsGiven.provenance(self, context)
        if not self.from_:
            return {}
        return {"grows": read_earlier(self.from_, context).finished.provenance()}

    def analyse(self, outcome: Outcome, context: StudyContext) -> dict[str, Any]:
        """Per quantity: the response-surface fit, ANOVA, effects and canonical analysis."""
        names = outcome.design.names
        centers, halves = read_coding(names, context.varied)
        coded = to_coded(outcome.design.matrix, centers, halves)
        terms = select_terms(self.response_model(), names)
        coding = {n: {"symbol": f"x{i + 1}", "center": float(c), "half_range": float(h)}
                  for i, (n, c, h) in enumerate(zip(names, centers, halves))}
        results: dict[str, Any] = {}
        for quantity, values in outcome.values.items():
            results[quantity] = analyse_quantity(coded, np.asarray(values, dtype=float),
                                                 outcome.ok, terms, names, outcome.design.matrix,
                                                 centers, halves) | {"coding": coding}
        if self.pareto:
            missing = sorted(set(self.pareto) - set(outcome.values))
            if missing:
                raise StudyError(f"pareto names unknown quantities {missing}; quantities are "
                                 f"{sorted(outcome.values)}", path="analysis.pareto")
            results["_pareto"] = build_pareto(outcome.values, self.pareto, names,
                                              outcome.design.matrix)
        return results

    def report(self, analysis: dict[str, Any], outcome: Outcome | None, figures: "Figures") -> str:
        """Coefficient and ANOVA tables, effect plots, a contour of the surface and the Pareto front."""
        from studyrun.analyses.doe.report import write_report

        return write_report(analysis, outcome, figures)


def least_runs(kind: str, k: int, center: int | None) -> tuple[int, str] | None:
    """At least the runs of a design of `k` factors whose size its type sets: Box-Behnken's
    4 per pair, a central composite's factorial part (from five factors a resolution V
    fraction: a power of 2 that estimates every pair), a fraction's or Plackett-Burman's k + 1."""
    centers = 1 if center is None else center
    pairs = k * (k - 1) // 2
    if kind == "bbd":
        return 4 * pairs + centers, "design"
    if kind == "ccd":
        cube = 2 ** k if k < 5 else 1 << (1 + k + pairs - 1).bit_length()
        return cube + 2 * k + centers, "design"
    if kind in ("fractional", "plackett_burman"):
        return k + 1, "design"
    return None


def term_count(response: str, names: list[str]) -> int:
    """The terms of a response surface, counted (a standard one of many factors has millions)."""
    k = len(names)
    standard = {"linear": 1 + k, "interaction": 1 + k + k * (k - 1) // 2,
                "quadratic": 1 + 2 * k + k * (k - 1) // 2}
    return standard.get(response) or len(select_terms(response, names))


def analyse_quantity(coded: np.ndarray, values: np.ndarray, ok: np.ndarray, terms: list,
                     names: list[str], natural: np.ndarray, centers: np.ndarray,
                     halves: np.ndarray) -> dict[str, Any]:
    """Fit one quantity over its successful runs and read its effects off the same runs."""
    use = np.asarray(ok, dtype=bool) & np.isfinite(values)
    dropped = int(len(values) - use.sum())
    if use.sum() < 2:
        return {"r2": None, "adj_r2": None, "rmse": None, "coefficients": {},
                "dropped_terms": [], "n_runs": int(use.sum()), "dropped_runs": dropped,
                "notes": [f"only {int(use.sum())} successful runs: nothing to fit"]}
    x, y = coded[use], values[use]
    result = fit_surface(x, y, terms)
    result["main_effects"] = compute_main_effects(x, y, names, natural[use])
    ranking = rank_factors(result, names)
    result["interactions"] = compute_interactions(x, y, names, ranking)
    if any(max(t) == 2 for t in terms):
        result["stationary_point"] = find_stationary_point(result, len(names), centers, halves, names)
    result["dropped_runs"] = dropped
    if dropped:
        result["notes"].append(f"{dropped} failed runs left out of the fit")
    return result
