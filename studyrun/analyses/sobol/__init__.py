"""Sobol' variance-based sensitivity indices (plan and analyse steps): SALib's design and numbers.

Design: Saltelli's scheme on a scrambled Sobol' sequence (`SALib.sample.sobol`; Saltelli 2002,
Campolongo et al. 2011), run in blocks of D + 2 runs per base sample (2D + 2 with second-order
indices): A, the D cross-samples AB_j (BA_j too for second order), and B. Estimators:
`SALib.analyze.sobol`'s (Saltelli et al. 2010 for S1, Jansen 1999 for ST, bootstrap intervals),
bit for bit, computed once per quantity by `bootstrap.py` in a fraction of SALib's time.

Results per quantity: S1, S1_conf, ST, ST_conf (parameter -> value; group -> value with
`groups`), S2 and S2_conf when `second_order` (nested maps a -> b -> value for each pair with b
after a in study order, as SALib's upper triangle), effective_N, dropped_blocks and
dropped_runs (a block with a failed run is dropped whole), `convergence` (point estimates
from the first N/4, N/2 and N surviving base samples), and `warnings`. Series named in
`outputs` get S1 and ST at every output time (`analyse_series`).

With `samples: {start, until: {ci}, max}` N doubles along the same Sobol' sequence (every
earlier run reused) until every S1_conf and ST_conf is at most ci (`precision.py`); the final
round's indices equal those of a fixed `samples: N` study, and `convergence` then holds every
round's indices and intervals.

Formulas, defaults and edge cases: docs/methods.md, "Sobol' indices".
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, field_validator

from studyrun.analyses.base import FixedDesignAnalysis, StudyContext, run_bytes
from studyrun.analyses.precision import PowerOfTwoSamples, Round, grow, reached
from studyrun.analyses.salib import (
    MIN_BLOCKS,
    Confidence,
    Resamples,
    by_factor,
    check_power_of_two,
    constant_output,
    dropped_warning,
    error_entry,
    failed_rows,
    group_labels,
    keep_whole_blocks,
    map_to_natural,
    missing_series,
    unique_labels,
    unknown_outputs,
)
from studyrun.analyses.salib.saltelli import saltelli_unit
from studyrun.analyses.sobol.records import SobolResults
from studyrun.core.design import Design, Outcome
from studyrun.core.errors import Problem, StudyError
from studyrun.core.numbers import finite_or_none
from studyrun.core.plugin import Example
from studyrun.core.sizes import Footprint

if TYPE_CHECKING:
    from studyrun.blocks.params import ParameterSpec
    from studyrun.results.report.figures import Figures

KUCHERENKO_INNER = 2  # conditional draws per outer draw with correlated inputs
KUCHERENKO = ("the inputs are correlated: S1 and ST are Kucherenko's first-order and total indices "
              "for dependent inputs (conditional sampling under the Gaussian copula), not Sobol' "
              "indices; S1 counts what an input explains with its correlated partners, ST what it "
              "explains beyond them. For shares that sum to 1, use type: shapley")
WIDE_INTERVAL = 0.1  # a confidence half-width above this earns a warning
BOOTSTRAP_BYTES = 64  # SALib's bootstrap: bytes x base samples x resamples (bench_memory.py)
SERIES_CHUNK = 1 << 22  # values of a series standardised at once (about 32 MB)


class Sobol(FixedDesignAnalysis):
    """`analysis: {type: sobol}`: first-order and total Sobol' indices, optionally second order."""

    without_correlation = None  # correlated: Kucherenko's indices by conditional sampling
    reads_series_quantities = True  # S1 and ST at every time of a series() quantity

    type: Literal["sobol"]
    tutorial = "Sobol'"
    example = Example({"analysis": {"type": "sobol", "samples": 16, "resamples": 10}},
                      failing={"parameters": {"a": {"bounds": [0.1, 0.95]}}})
    results_model = SobolResults
    samples: int | PowerOfTwoSamples = Field(
        1024, description="base samples N (a power of 2); runs = N (D + 2), or N (2D + 2) with "
                          "second_order; or {start, until: {ci}, max}: N doubles until every "
                          "S1_conf and ST_conf is at most ci")
    second_order: bool = False
    confidence: Confidence = 0.95
    resamples: Resamples = 100
    groups: dict[str, list[str]] | None = Field(
        None, description="group name -> parameter names; indices are then per group")
    outputs: list[str] = Field(
        default_factory=list, description="model time series to analyse at every output time")

    @field_validator("samples")
    @classmethod
    def _samples_power_of_two(cls, value: int | PowerOfTwoSamples) -> int | PowerOfTwoSamples:
        return check_power_of_two(value, "sobol") if isinstance(value, int) else value

    @property
    def iterative(self) -> bool:  # type: ignore[override]
        """A precision target grows the design round by round through `iterate`."""
        return isinstance(self.samples, PowerOfTwoSamples)

    @property
    def base_samples(self) -> int:
        """N of the fixed design; with a precision target, the most N may reach."""
        return self.samples if isinstance(self.samples, int) else self.samples.max

    def check(self, context: StudyContext) -> list[Problem]:
        """At least one varied parameter; groups must name varied parameters, each once; each of
        `outputs` is an output of the model, where the model declares its outputs."""
        problems = self.parameter_problems(context.varied)
        if self.outputs and not isinstance(self.samples, int):
            problems.append(Problem("time-resolved indices need a fixed samples: N; run this "
                                    "study without outputs, then one with samples: N reached",
                                    path="outputs"))
        if context.correlation is not None:
            problems += [Problem(f"with correlated inputs sobol gives Kucherenko's first-order and "
                                 f"total indices only: {key} is not available; leave it out, or "
                                 "use type: shapley", path=key)
                         for key, given in (("second_order", self.second_order),
                                            ("groups", self.groups), ("outputs", self.outputs),
                                            ("samples", not isinstance(self.samples, int)))
                         if given]
        return problems + unknown_outputs(self.outputs, context.model)

    def warnings(self, context: StudyContext) -> list[str]:
        if context.correlation is None:
            return []
        return [KUCHERENKO]

    def parameter_problems(self, parameters: dict[str, "ParameterSpec"]) -> list[Problem]:
        if not parameters:
            return []  # the study's own check says so (study/spec/checks.py)
        try:
            group_labels(list(parameters), self.groups)
        except StudyError as error:
            return error.problems
        return []

    def needs_series(self, context: StudyContext) -> list[str]:
        return list(self.outputs)

    def run_count(self, context: StudyContext) -> tuple[int, str]:
        names = list(context.varied)
        try:
            factors = len(unique_labels(names, group_labels(names, self.groups)))
        except StudyError:  # reported by check()
            factors = len(names)
        key = "samples" if isinstance(self.samples, int) else "samples.max"
        if context.correlation is not None:
            from studyrun.analyses.shapley.estimator import kucherenko_scheme

            blocks = len(kucherenko_scheme(len(names)).blocks)
            return self.base_samples * (1 + KUCHERENKO_INNER * blocks), key
        return self.base_samples * ((2 if self.second_order else 1) * factors + 2), key

    def footprint(self, context: StudyContext) -> Footprint:
        """The runs, and SALib's bootstrap of a quantity (the base samples resampled
        `resamples` times), at `samples`, or at `resamples` where the study sets it and the
        bootstrap weighs more."""
        runs, key = self.run_count(context)
        block, n, resamples = runs // self.base_samples, self.base_samples, self.resamples
        each = run_bytes(context)
        if "resamples" in self.model_fields_set and BOOTSTRAP_BYTES * resamples > each * block:
            return Footprint("resamples", resamples, "resamples", lambda r: (
                each * runs + BOOTSTRAP_BYTES * n * r), f"SALib's bootstrap: {BOOTSTRAP_BYTES} "
                f"bytes x {n:,} base samples x resamples; and {each:,} bytes a run",
                ", or fewer samples")
        return Footprint(key, n, "base samples", lambda b: (
            (each * block + BOOTSTRAP_BYTES * resamples) * b),
            f"{each:,} bytes a run x {block} runs a base sample; SALib's bootstrap: "
            f"{BOOTSTRAP_BYTES} bytes x {resamples:,} resamples a base sample", ", or fewer resamples",
            allowed=lambda b: 1 << (b.bit_length() - 1))  # a power of 2

    def design(self, context: StudyContext, seed: np.random.SeedSequence) -> Design:
        """Saltelli's cross-sampled Sobol' points on the unit cube (the first round's with a
        precision target), mapped through each ppf."""
        if context.correlation is not None:
            return self.kucherenko(context, seed)
        if isinstance(self.samples, int):
            return self.saltelli(context, seed, self.samples)
        return self.saltelli(context, seed, self.samples.start)

    def kucherenko(self, context: StudyContext, seed: np.random.SeedSequence) -> Design:
        """Correlated inputs: N runs for the variance, then N outer draws of each singleton's and
        each all-but-one set's complement, each with KUCHERENKO_INNER conditional draws of the
        set (exact under the study's Gaussian copula; analyses/shapley/estimator.py)."""
        from scipy.special import ndtr

        from studyrun.analyses.shapley.estimator import design_scores, kucherenko_scheme
        from studyrun.blocks.params import design_facts

        names, n = list(context.varied), self.base_samples
        design_seed, bootstrap_seed = (int(s) for s in seed.generate_state(2))
        plan = kucherenko_scheme(len(names))
        z = design_scores(plan, n, n, KUCHERENKO_INNER, context.correlation,
                          np.random.default_rng(design_seed))
        x = map_to_natural(ndtr(z), context.varied, names)
        info = {"method": "kucherenko", "base_samples": n, "inner": KUCHERENKO_INNER,
                "factors": names, "bootstrap_seed": bootstrap_seed or 1}
        return Design(names, x, info | design_facts(context.correlation, names, x[:n]))

    def describe_design(self, design: Design, context: StudyContext) -> str:
        if isinstance(self.samples, int):
            return ""
        block, target = design.info["block"], self.samples
        return (f"sobol: Saltelli blocks of {block} runs; N = {target.start} base samples "
                f"({target.start * block} runs), doubled along the same Sobol' sequence (every "
                f"earlier run reused) until every S1_conf and ST_conf is at most "
                f"{target.until.ci}, or N reaches {target.max} ({target.max * block} runs)")

    def iterate(self, evaluate, context: StudyContext, seed: np.random.SeedSequence) -> dict:
        """Double N until every quantity's intervals meet the target; the last round's results."""
        assert isinstance(self.samples, PowerOfTwoSamples)
        target = self.samples.until
        rounds = grow(evaluate, self.samples.sizes(),
                      lambda n: self.saltelli(context, seed, n),
                      lambda outcome: self.analyse(outcome, context),
                      lambda results: {name: intervals_met(entry, target.ci)
                                       for name, entry in results.items()})
        results = reached(rounds, target)
        for name, entry in results.items():
            if "S1" in entry:
                entry["convergence"] = rounds_table(rounds, name, list(entry["S1"]))
        return results

    def saltelli(self, context: StudyContext, seed: np.random.SeedSequence, samples: int) -> Design:
        """N = `samples` Saltelli blocks; a larger N continues the same sequence (SALib's
        sample(2N) begins with sample(N) for the same seed)."""
        parameters = context.varied
        names = list(parameters)
        labels = group_labels(names, self.groups)
        sample_seed, bootstrap_seed = (int(s) for s in seed.generate_state(2))
        unit = saltelli_unit(len(names), samples, self.second_order, sample_seed, labels)
        factors = unique_labels(names, labels)
        block = (2 if self.second_order else 1) * len(factors) + 2
        info = {"method": "sobol", "base_samples": samples, "block": block,
                "factors": factors, "groups": labels, "bootstrap_seed": bootstrap_seed or 1}
        return Design(names, map_to_natural(unit, parameters, names), info)

    def analyse_runs(self, runs, context: StudyContext) -> dict[str, Any]:
        """As `analyse`; but series too large to read whole are read a chunk of whole blocks
        at a time, their indices summed over the chunks (streamed.py)."""
        if not runs.series_in_chunks:
            return self.analyse(runs.whole(), context)
        from studyrun.analyses.sobol.streamed import streamed_series

        outcome = runs.whole(series=False)
        results = self.model_copy(update={"outputs": []}).analyse(outcome, context)
        info = outcome.design.info
        chunks = runs.series_chunks(multiple=info["block"])
        for name, resolved in streamed_series(chunks, list(runs.series), info).items():
            if name in results:  # a quantity of the same name keeps its place
                results[name]["time_resolved"] = resolved
            else:
                results[name] = resolved
        return results

    def analyse(self, outcome: Outcome, context: StudyContext) -> dict[str, Any]:
        """Indices per quantity (SALib, once per quantity) and per time for requested series."""
        results = {name: self.analyse_quantity(values, failed_rows(outcome, name, values),
                                               outcome.design)
                   for name, values in outcome.values.items()}
        for name in dict.fromkeys([*outcome.series, *self.outputs]):
            series = outcome.series.get(name)
            resolved = missing_series(name, series, outcome.ok) or analyse_series(
                series, outcome.time, failed_rows(outcome, name, series), outcome.design.info)
            if outcome.series_notes:  # runs left out because their grids end early, by id
                resolved["warnings"] = outcome.series_notes + resolved.get("warnings", [])
            if name in results:  # a quantity of the same name keeps its place
                results[name]["time_resolved"] = resolved
            else:
                results[name] = resolved
        return results

    def analyse_quantity(self, values: np.ndarray, bad: np.ndarray, design: Design) -> dict[str, Any]:
        """S1, ST (and S2) with intervals, a convergence table and warnings for one quantity."""
        info = design.info
        if info.get("method") == "kucherenko":
            return self.analyse_kucherenko(values, bad, design)
        block, factors = info["block"], info["factors"]
        keep, dropped = keep_whole_blocks(bad, block)
        kept = info["base_samples"] - dropped
        facts: dict[str, Any] = {"effective_N": kept, "dropped_blocks": dropped,
                                 "dropped_runs": dropped * block}
        if kept < MIN_BLOCKS:
            return error_entry(f"only {kept} of {info['base_samples']} base samples have every "
                               f"run of their block succeeded; at least {MIN_BLOCKS} are needed",
                               **facts)
        y = values[keep]
        notes = [dropped_warning(dropped, "blocks of base samples", kept)] if dropped else []
        if constant_output(y):
            zeros = dict.fromkeys(factors, 0.0)
            entry = {"S1": zeros, "S1_conf": zeros, "ST": zeros, "ST_conf": zeros}
            if self.second_order:
                pairs = {a: dict.fromkeys(factors[i + 1:], 0.0) for i, a in enumerate(factors[:-1])}
                entry |= {"S2": pairs, "S2_conf": pairs}
            return entry | facts | {"warnings": notes + [
                "the quantity is the same in every run: no parameter changes it, so every "
                "index is 0"]}
        entry = self._call_salib(y, design, factors)
        entry.update(facts)
        entry["convergence"] = convergence_table(y.reshape(kept, block), factors)
        entry["warnings"] = notes + check_indices(entry)
        return entry

    def analyse_kucherenko(self, values: np.ndarray, bad: np.ndarray, design: Design) -> dict[str, Any]:
        """Kucherenko's S1 and ST with bootstrap intervals, from a `kucherenko` design."""
        from studyrun.analyses.shapley.estimator import (
            Constant,
            Sizes,
            TooFew,
            estimate,
            kucherenko_scheme,
        )

        info, names = design.info, design.names
        n = info["base_samples"]
        facts: dict[str, Any] = {"dropped_runs": int(bad.sum())}
        try:
            found = estimate(values, bad, kucherenko_scheme(len(names)),
                             Sizes(n, n, info["inner"]), self.resamples, self.confidence,
                             info["bootstrap_seed"])
        except TooFew as few:
            return error_entry(f"only {few.fewest} usable draws for a variance; at least 2 are "
                               "needed", **facts)
        except Constant:
            zeros = dict.fromkeys(names, 0.0)
            return {"S1": zeros, "S1_conf": zeros, "ST": zeros, "ST_conf": zeros, **facts,
                    "warnings": ["the quantity is the same in every run: no parameter changes "
                                 "it, so every index is 0"]}
        entry = {key: by_factor(names, found[key]) for key in ("S1", "S1_conf", "ST", "ST_conf")}
        notes = [f"{found['dropped_outer']} outer draws left out because a run in them failed or "
                 "gave no finite value"] if found["dropped_outer"] else []
        return entry | facts | {"warnings": notes + check_indices(entry, ordered=False)}

    def _call_salib(self, y: np.ndarray, design: Design, factors: list[str]) -> dict[str, Any]:
        """SALib's `sobol.analyze` of `y`, bit for bit, in a fraction of its time (bootstrap.py)."""
        from studyrun.analyses.sobol.bootstrap import analyze

        si = analyze(y, len(factors), self.second_order, self.resamples, self.confidence,
                     design.info["bootstrap_seed"])
        entry = {key: by_factor(factors, si[key]) for key in ("S1", "S1_conf", "ST", "ST_conf")}
        if self.second_order:
            for key in ("S2", "S2_conf"):
                entry[key] = {a: {b: finite_or_none(si[key][i, k])
                                  for k, b in enumerate(factors) if k > i}
                              for i, a in enumerate(factors[:-1])}
        return entry

    def report(self, analysis: dict[str, Any], outcome: Outcome | None, figures: "Figures") -> str:
        from studyrun.analyses.sobol.report import write_report

        return write_report(analysis, figures)


def intervals_met(entry: dict[str, Any], ci: float) -> bool:
    """Every S1_conf and ST_conf of a quantity's entry is known and at most `ci`."""
    widths = [w for key in ("S1_conf", "ST_conf") for w in entry.get(key, {None: None}).values()]
    return all(w is not None and w <= ci for w in widths)


def rounds_table(rounds: list[Round], name: str, factors: list[str]) -> dict[str, Any]:
    """N -> S1, ST, S1_conf and ST_conf of each round (null where a round gave an error)."""
    table: dict[str, Any] = {"N": [r.size for r in rounds]}
    for key in ("S1", "ST", "S1_conf", "ST_conf"):
        table[key] = {f: [r.results[name].get(key, {}).get(f) for r in rounds] for f in factors}
    return table


def estimate_indices(blocks: np.ndarray, factors: int) -> tuple[np.ndarray, np.ndarray]:
    """Point estimates of S1 and ST from Saltelli blocks, as in SALib.analyze.sobol.

    `blocks` has shape (N, block) or (N, block, T); the output is standardised over the N
    blocks (per time), then S1 = mean(B (AB_j - A)) / V and ST = mean((A - AB_j)^2) / 2V with V
    the variance of [A; B]. Returns arrays (factors,) or (factors, T); NaN where V is 0.
    """
    y = blocks.reshape(blocks.shape[0] * blocks.shape[1], *blocks.shape[2:])
    std = y.std(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        z = ((blocks - y.mean(axis=0)) / std)
        a, b, ab = z[:, :1], z[:, -1:], z[:, 1:1 + factors]
        variance = np.concatenate([a, b]).var(axis=0)
        s1 = np.mean(b * (ab - a), axis=0) / variance
        st = 0.5 * np.mean((a - ab) ** 2, axis=0) / variance
    flat = ~(std > np.finfo(float).eps * np.maximum(1.0, np.abs(y).max(axis=0)))
    s1[..., flat] = np.nan
    st[..., flat] = np.nan
    return s1, st


def convergence_table(blocks: np.ndarray, factors: list[str]) -> dict[str, Any]:
    """S1 and ST from the first N/4, N/2 and all N base samples (no bootstrap: cheap)."""
    n = blocks.shape[0]
    sizes = sorted({size for size in (n // 4, n // 2, n) if size >= 2})
    table: dict[str, Any] = {"N": sizes, "S1": {f: [] for f in factors},
                             "ST": {f: [] for f in factors}}
    for size in sizes:
        s1, st = estimate_indices(blocks[:size], len(factors))
        for j, factor in enumerate(factors):
            table["S1"][factor].append(finite_or_none(s1[j]))
            table["ST"][factor].append(finite_or_none(st[j]))
    return table


def analyse_series(series: np.ndarray, time: np.ndarray | None, bad: np.ndarray,
                   info: dict[str, Any]) -> dict[str, Any]:
    """Time-resolved S1 and ST: the Sobol' estimators at every output time of a series.

    `series` has shape (runs, T). Blocks with a failed run are dropped as for quantities. Times
    where the output does not vary (often the start) give None.
    """
    block, factors = info["block"], info["factors"]
    keep, dropped = keep_whole_blocks(bad, block)
    kept = info["base_samples"] - dropped
    steps = np.arange(series.shape[1]) if time is None else np.asarray(time)
    facts = {"effective_N": kept, "dropped_blocks": dropped, "dropped_runs": dropped * block}
    if kept < MIN_BLOCKS:
        return error_entry(f"only {kept} base samples have every run of their block succeeded; "
                           f"at least {MIN_BLOCKS} are needed", **facts)
    blocks = series[keep].reshape(kept, block, -1)
    width = max(1, SERIES_CHUNK // blocks[:, :, 0].size)  # output times per pass, to bound memory
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        parts = [estimate_indices(blocks[:, :, t:t + width], len(factors))
                 for t in range(0, blocks.shape[2], width)]
    s1, st = (np.concatenate([part[i] for part in parts], axis=-1) for i in (0, 1))
    return {"time": [float(t) for t in steps],
            "S1": {f: [finite_or_none(v) for v in s1[j]] for j, f in enumerate(factors)},
            "ST": {f: [finite_or_none(v) for v in st[j]] for j, f in enumerate(factors)},
            **facts,
            "warnings": [dropped_warning(dropped, "blocks of base samples", kept)] if dropped else []}


def check_indices(entry: dict[str, Any], ordered: bool = True) -> list[str]:
    """Warnings for wide intervals and (`ordered`: independent inputs, where ST bounds S1) for
    S1 above ST by more than S1's interval."""
    notes = []
    for key in ("S1_conf", "ST_conf"):
        widths = {f: w for f, w in entry[key].items() if w is not None}
        if widths and max(widths.values()) > WIDE_INTERVAL:
            worst = max(widths, key=widths.get)
            notes.append(f"wide confidence intervals: {key} is {widths[worst]:.3g} for {worst} "
                         f"(above {WIDE_INTERVAL}); increase samples")
    for factor, s1 in entry["S1"].items() if ordered else ():
        st, conf = entry["ST"][factor], entry["S1_conf"][factor]
        if None not in (s1, st, conf) and s1 - st > conf:
            notes.append(f"S1 ({s1:.3g}) exceeds ST ({st:.3g}) for {factor} by more than its "
                         f"interval ({conf:.3g}): the estimates have not converged; increase "
                         f"samples")
    return notes
