"""Morris elementary effects screening (plan and analyse steps), through SALib.

Design: `SALib.sample.morris` trajectories on a `levels`-level grid of the unit cube (Morris
1991; optimised trajectories as in Campolongo et al. 2007 with `optimal_trajectories`), each
column mapped through its parameter's ppf. Analysis: `SALib.analyze.morris` (mu, mu_star,
sigma and a bootstrap interval for mu_star).

Units: SALib divides each output change by the step as a fraction of the grid (delta =
levels / (2 (levels - 1))), not by the change in natural units, so mu, mu_star and sigma are
in units of the quantity, per whole range of the parameter on its quantile (unit) scale. For a
uniform parameter that is exactly what SALib gives with `bounds: [low, high]`. SALib reads the
design only for the direction of each step, so the natural-unit design matrix is passed as it
is (a monotone ppf keeps every direction).

With `trajectories: {start, until: stable, max}` trajectories are added in rounds that double
their count (round k drawn from the study seed's child k) until the ranking by mu_star of every
quantity is the same over two consecutive doublings, or the count would pass max.

Formulas, defaults and edge cases: docs/methods.md, "Morris elementary effects".
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    RootModel,
    ValidationInfo,
    field_validator,
    model_validator,
)

from studyrun.analyses.base import (
    INDEPENDENT_INPUTS,
    FixedDesignAnalysis,
    StudyContext,
    run_bytes,
    runs_footprint,
)
from studyrun.analyses.precision import Round, doublings, grow
from studyrun.analyses.precision_report import reached_line, widths_plot
from studyrun.analyses.salib import (
    MIN_BLOCKS,
    Confidence,
    Resamples,
    by_factor,
    constant_output,
    dropped_warning,
    error_entry,
    failed_rows,
    keep_whole_blocks,
    map_to_natural,
    rows_kept,
    unit_problem,
)
from studyrun.analyses.salib.report import facts_line, figure_name, index_table, nan, warnings_block
from studyrun.core.design import Design, Outcome
from studyrun.core.errors import StudyError
from studyrun.core.plugin import Example
from studyrun.core.sizes import Footprint
from studyrun.results.records import STRICT, ByName, Entry
from studyrun.results.report.markdown import escape
from studyrun.results.report.wide import shown, top_note

if TYPE_CHECKING:
    from studyrun.results.report.figures import Figures

KEYS = ("mu", "mu_star", "sigma", "mu_star_conf")
STABLE_ROUNDS = 3  # the same ranking at N, 2N and 4N: stable over two doublings


class Trajectories(BaseModel):
    """`trajectories: {start, until: stable, max}`: double until the mu_star ranking settles."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: int = Field(ge=2, description="trajectories in the first round")
    until: Literal["stable"] = Field(description="stable: the ranking by mu_star of every "
                                                 "quantity is unchanged over two doublings")
    max: PositiveInt = Field(description="never more trajectories than this")

    @field_validator("max")
    @classmethod
    def _room_for_two_doublings(cls, value: int, info: ValidationInfo) -> int:
        start = info.data.get("start")
        if start is not None and value < 4 * start:
            raise ValueError(f"max ({value}) leaves no room for two doublings of start "
                             f"({start}); give a max of at least {4 * start}")
        return value

    def sizes(self) -> list[int]:
        return doublings(self.start, self.max)


class MorrisQuantity(Entry):
    """Elementary effects: mean, mean of absolute values (with its half-width), spread."""

    mu: ByName = {}
    mu_star: ByName = {}
    mu_star_conf: ByName = {}
    sigma: ByName = {}


class MorrisResults(RootModel[dict[str, MorrisQuantity]]):
    """Quantity -> its effects."""

    model_config = STRICT


class Morris(FixedDesignAnalysis):
    """`analysis: {type: morris}`: elementary-effects screening of the parameters."""

    without_correlation = INDEPENDENT_INPUTS

    type: Literal["morris"]
    tutorial = "Morris"
    example = Example({"analysis": {"type": "morris", "trajectories": 12, "resamples": 10}},
                      failing={"parameters": {"a": {"bounds": [0.1, 0.95]},
                                              "b": {"bounds": [0.1, 0.9]}}})
    results_model = MorrisResults
    trajectories: Annotated[int, Field(ge=2)] | Trajectories = Field(
        10, description="trajectories (candidates when optimising); or {start, until: stable, "
                        "max}: doubled until the ranking by mu_star is stable")
    levels: int = Field(4, ge=2, description="grid levels per parameter (even)")
    optimal_trajectories: int | None = Field(
        None, description="keep this many of `trajectories`, spread out (Campolongo 2007)")
    local_optimization: bool = True
    confidence: Confidence = 0.95
    resamples: Resamples = 100

    @field_validator("levels")
    @classmethod
    def _levels_even(cls, value: int) -> int:
        if value % 2:
            raise ValueError(f"must be even for morris; got {value} (try {value + 1})")
        return value

    @model_validator(mode="after")
    def _optimal_below_trajectories(self) -> "Morris":
        k = self.optimal_trajectories
        if k is not None and isinstance(self.trajectories, Trajectories):
            raise ValueError("optimal_trajectories needs a fixed number of trajectories; growing "
                             "trajectories are added as drawn")
        if k is not None and not 2 <= k < self.trajectories:  # type: ignore[operator]
            raise ValueError(f"optimal_trajectories must be between 2 and trajectories - 1 "
                             f"({self.trajectories - 1}); got {k}")
        return self

    def footprint(self, context: StudyContext) -> Footprint:
        """The runs; with optimal_trajectories chosen by brute force, SALib's score of every
        combination of them (4 bytes each)."""
        runs, key = self.run_count(context)
        k = self.optimal_trajectories
        if k is None or self.local_optimization:
            return runs_footprint(context, (runs, key))
        each = run_bytes(context) * (len(context.varied) + 1)  # a trajectory's runs

        def bytes_at(t: int) -> float:
            return each * t + 4 * min(math.comb(t, k), 2**80)

        return Footprint("trajectories", int(self.trajectories), "trajectories",  # type: ignore[arg-type]
                         bytes_at, f"SALib's brute-force choice of {k}: 4 bytes for each "
                         f"combination of {k} trajectories; and the runs",
                         ", or local_optimization: true")

    @property
    def iterative(self) -> bool:  # type: ignore[override]
        """Growing trajectories are added round by round through `iterate`."""
        return isinstance(self.trajectories, Trajectories)

    def run_count(self, context: StudyContext) -> tuple[int, str]:
        if isinstance(self.trajectories, Trajectories):
            return self.trajectories.max * (len(context.varied) + 1), "trajectories.max"
        return self.trajectories * (len(context.varied) + 1), "trajectories"

    def design(self, context: StudyContext, seed: np.random.SeedSequence) -> Design:
        """Morris trajectories on the unit grid, mapped through each parameter's ppf (the first
        round's when they grow)."""
        if isinstance(self.trajectories, Trajectories):
            return self.grown(context, seed, self.trajectories.start)
        return self.rounds_design(context, seed, [self.trajectories])

    def grown(self, context: StudyContext, seed: np.random.SeedSequence, count: int) -> Design:
        """The first `count` trajectories of a growing design: the first round's drawn as a
        fixed `trajectories: start` study draws them, each later round from its own child seed."""
        assert isinstance(self.trajectories, Trajectories)
        sizes = [n for n in self.trajectories.sizes() if n <= count]
        return self.rounds_design(context, seed, [sizes[0], *sizes[:-1]])

    def rounds_design(self, context: StudyContext, seed: np.random.SeedSequence,
                      counts: list[int]) -> Design:
        """Rounds of `counts` trajectories one after another; round k > 0 drawn from the seed's
        child k."""
        from SALib.sample import morris as morris_sample

        parameters = context.varied
        names = list(parameters)
        sample_seed, bootstrap_seed = (int(s) for s in seed.generate_state(2))
        units = []
        for k, count in enumerate(counts):
            child = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, k))
            units.append(morris_sample.sample(
                unit_problem(names), count, num_levels=self.levels,
                optimal_trajectories=self.optimal_trajectories,
                local_optimization=self.local_optimization,
                seed=sample_seed if k == 0 else int(child.generate_state(1)[0])))
        unit = np.vstack(units)
        matrix = map_to_natural(unit, parameters, names)
        check_steps(unit, matrix, names)
        info = {"method": "morris", "trajectories": len(unit) // (len(names) + 1),
                "block": len(names) + 1, "levels": self.levels,
                "bootstrap_seed": bootstrap_seed or 1}
        return Design(names, matrix, info)

    def describe_design(self, design: Design, context: StudyContext) -> str:
        if not isinstance(self.trajectories, Trajectories):
            return ""
        target, block = self.trajectories, len(context.varied) + 1
        return (f"morris: {target.start} trajectories of {block} runs, doubled round by round "
                f"(each round drawn afresh, every earlier run reused) until the ranking by "
                f"mu_star of every quantity is the same over two doublings, or the trajectories "
                f"reach {target.max} ({target.max * block} runs)")

    def iterate(self, evaluate, context: StudyContext, seed: np.random.SeedSequence) -> dict:
        """Double the trajectories until every quantity's mu_star ranking is stable."""
        assert isinstance(self.trajectories, Trajectories)
        rankings: list[dict[str, list[str] | None]] = []

        def stable(results: dict[str, Any]) -> dict[str, bool]:
            rankings.append({name: ranking(entry) for name, entry in results.items()})
            last = rankings[-STABLE_ROUNDS:]
            return {name: len(last) == STABLE_ROUNDS and last[0][name] is not None
                    and all(r.get(name) == last[0][name] for r in last) for name in results}

        rounds = grow(evaluate, self.trajectories.sizes(), lambda n: self.grown(context, seed, n),
                      lambda outcome: self.analyse(outcome, context), stable)
        last = rounds[-1]
        results = {}
        for name, entry in last.results.items():
            entry = entry | {"samples_reached": last.size, "target_met": last.met[name],
                             "target": "stable", "convergence": rounds_table(rounds, name)}
            if not last.met[name]:
                entry["warnings"] = [*entry.get("warnings", []),
                                     f"the ranking by mu_star was not stable over two doublings "
                                     f"by {last.size} trajectories (trajectories.max)"]
            results[name] = entry
        return results

    def analyse(self, outcome: Outcome, context: StudyContext) -> dict[str, Any]:
        """mu, mu_star, sigma, mu_star_conf per quantity, on trajectories without failures."""
        return {name: self.analyse_quantity(values, failed_rows(outcome, name, values),
                                            outcome.design)
                for name, values in outcome.values.items()}

    def analyse_quantity(self, values: np.ndarray, bad: np.ndarray, design: Design) -> dict[str, Any]:
        """One quantity: drop trajectories with a failed run, then SALib's Morris analysis."""
        from SALib.analyze import morris as morris_analyze

        info, names = design.info, design.names
        keep, dropped = keep_whole_blocks(bad, info["block"])
        kept = info["trajectories"] - dropped
        facts: dict[str, Any] = {"effective_N": kept, "dropped_blocks": dropped,
                                 "dropped_runs": dropped * info["block"]}
        if kept < MIN_BLOCKS:
            return error_entry(f"only {kept} of {info['trajectories']} trajectories have every "
                               f"run succeeded; at least {MIN_BLOCKS} are needed", **facts)
        notes = [dropped_warning(dropped, "trajectories", kept)] if dropped else []
        y = values[keep]
        if constant_output(y):
            zeros = dict.fromkeys(names, 0.0)
            return {key: zeros for key in KEYS} | facts | {
                "warnings": notes + ["the quantity is the same in every run: every effect is 0"]}
        si = morris_analyze.analyze(unit_problem(names), rows_kept(design.matrix, keep), y,
                                    num_resamples=self.resamples, conf_level=self.confidence,
                                    num_levels=self.levels, seed=info["bootstrap_seed"])
        entry = {key: by_factor(names, si[key]) for key in KEYS}
        return entry | facts | {"warnings": notes + check_effects(entry)}

    def report(self, analysis: dict[str, Any], outcome: Outcome | None, figures: "Figures") -> str:
        parts = ["## Morris elementary effects",
                 "mu_star (mean absolute effect) ranks the parameters; sigma large against "
                 "mu_star means interactions or non-linearity."]
        for name, entry in analysis.get("results", {}).items():
            parts.append(f"### {escape(name)}")
            stars = entry.get("mu_star") or {}
            parts += [reached_line(entry, "trajectories"), facts_line(entry),
                      top_note(stars, "mu_star"), index_table(entry, KEYS, "mu_star")]
            draws = figures.draws(name)
            if "mu_star" in entry and draws:
                parts.append(draw_mu_star_sigma(name, entry, figures))
            if "convergence" in entry and draws:
                widths = entry["convergence"]["mu_star_conf"]
                parts.append(widths_plot(name, "morris", entry["convergence"]["N"],
                                         {f: widths[f] for f in shown(stars)}, None, figures,
                                         "mu_star_conf (95% half-width)"))
            parts.append(warnings_block(entry))
        return "\n\n".join(p for p in parts if p) + "\n"


def ranking(entry: dict[str, Any]) -> list[str] | None:
    """The parameters by decreasing mu_star (ties in study order); None without numbers."""
    stars = entry.get("mu_star")
    if not stars or None in stars.values():
        return None
    return sorted(stars, key=lambda f: -stars[f])


def rounds_table(rounds: list[Round], name: str) -> dict[str, Any]:
    """Trajectories N -> mu_star, mu_star_conf and the ranking, per round."""
    entries = [r.results[name] for r in rounds]
    factors = list(entries[-1].get("mu_star", {}))
    return {"N": [r.size for r in rounds],
            "mu_star": {f: [e.get("mu_star", {}).get(f) for e in entries] for f in factors},
            "mu_star_conf": {f: [e.get("mu_star_conf", {}).get(f) for e in entries]
                             for f in factors},
            "ranking": [ranking(e) for e in entries]}


def check_steps(unit: np.ndarray, matrix: np.ndarray, names: list[str]) -> None:
    """Every Morris step must move its parameter in natural units (not so for a coarse discrete)."""
    moved_unit = np.diff(unit.reshape(-1, len(names) + 1, len(names)), axis=1) != 0
    moved = np.diff(matrix.reshape(moved_unit.shape[0], -1, len(names)), axis=1) != 0
    stuck = (moved_unit & ~moved).any(axis=(0, 1))
    if stuck.any():
        which = ", ".join(n for n, s in zip(names, stuck) if s)
        raise StudyError(f"neighbouring Morris levels give the same value of {which} (a discrete "
                         f"parameter with fewer values than levels?); use fewer levels",
                         path="levels")


def check_effects(entry: dict[str, Any]) -> list[str]:
    """A warning when an influential parameter's mu_star interval is wider than half of it."""
    stars = {f: v for f, v in entry["mu_star"].items() if v is not None}
    top = max(stars.values(), default=0.0)
    wide = [f for f, v in stars.items() if v > 0.1 * top
            and (entry["mu_star_conf"][f] or 0.0) > 0.5 * v]
    if not wide:
        return []
    return [f"wide confidence intervals: mu_star_conf exceeds half of mu_star for "
            f"{', '.join(wide)}; increase trajectories"]


def draw_mu_star_sigma(name: str, entry: dict[str, Any], figures: "Figures") -> str:
    """The mu*-sigma plane (Morris 1991), with sigma / mu* = 0.1, 0.5 and 1 guide lines; for a
    wide study, of the parameters of largest mu*."""
    fig, ax = figures.new(size=(5.5, 4.2))
    factors = shown(entry["mu_star"])
    x = np.array([nan(entry["mu_star"][f]) for f in factors])
    y = np.array([nan(entry["sigma"][f]) for f in factors])
    xerr = [nan(entry["mu_star_conf"][f]) for f in factors]
    ax.errorbar(x, y, xerr=xerr, fmt="o", capsize=3)
    for f, xi, yi in zip(factors, x, y):
        ax.annotate(f, (xi, yi), textcoords="offset points", xytext=(4, 4), fontsize="small")
    top = float(np.nanmax(x)) if np.isfinite(x).any() else 1.0
    for ratio in (0.1, 0.5, 1.0):
        ax.plot([0, top * 1.1], [0, ratio * top * 1.1], color="grey", linewidth=0.6,
                linestyle=":")
    ax.set_xlabel("mu* (mean |elementary effect|)")
    ax.set_ylabel("sigma")
    ax.set_title(f"Morris: {name}")
    return figures.save(fig, figure_name("morris", name), f"Morris mu*-sigma: {name}")
