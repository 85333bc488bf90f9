"""The calibration workflow: cost at the start, the fit (by the chosen method), its statistics,
the model before and after, and the `results` block of analysis.json (keys in __init__.py)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import yaml

from studyrun.analyses.calibrate.cost import FAILED_RESIDUAL, CostFunction
from studyrun.analyses.calibrate.data import Observations, check_against_model
from studyrun.analyses.calibrate.sequential import fitted_series, start_box
from studyrun.analyses.search.batching import Evaluations, lockstep
from studyrun.analyses.search.fit import Box, FitResult, Settings, fit, jacobian, statistics
from studyrun.blocks.params import sample_unit
from studyrun.core.design import Outcome
from studyrun.core.errors import StudyError

UNFITTED = ("every run the fit tried failed or gave no finite cost, the start's too: the "
            "estimate is no fit; start where the model runs (set the parameters' nominal values)")


def calibrate(spec, evaluate, context, seed: np.random.SeedSequence) -> dict[str, Any]:
    """Fit the varied parameters to the data by `spec.method`; return the results block."""
    data = spec.observations(context)
    parameters = context.varied
    costs = CostFunction(data)
    extra: dict[str, Any] = {}
    box, extra["start"] = start_box(spec, context)
    lhs_seed, evolution_seed, mcmc_seed = seed.spawn(3)
    evaluations = Evaluations(evaluate, summariser(costs))
    evaluations(box.start[None])
    check_first_run(data, evaluations.first, costs)
    settings = fit_settings(spec)
    notes = []
    if spec.jacobian == "exact":
        from studyrun.analyses.calibrate.exact import exact_jacobian

        settings.exact, note = exact_jacobian(context, costs, box)
        notes += [note] if note else []
    if spec.method == "lbfgsb":
        from studyrun.analyses.calibrate.exact import cost_gradient

        settings.gradient, extra["gradient"], found = cost_gradient(spec.gradient, context, costs,
                                                                    box)
        notes += found
    if spec.method == "gradient-matching":
        from studyrun.analyses.calibrate.gradient import gradient_matching

        result, extra["gradient_matching"] = gradient_matching(spec, context, evaluate,
                                                               evaluations, data, box, settings)
    else:
        if spec.method == "mcmc":
            settings.method = spec.fit
        result, extra["starts"] = fit_from_starts(spec, evaluations, box, settings, lhs_seed,
                                                  evolution_seed)
    if settings.gradient is not None:
        extra["gradient"] = settings.gradient.summary()
    J, r = jacobian(evaluations, result.estimate, box, settings)
    stats = statistics(J, r, result.estimate, box.names)
    if spec.method == "mcmc":
        from studyrun.analyses.calibrate.mcmc import run_mcmc

        extra["mcmc"] = run_mcmc(spec.mcmc, evaluate, evaluations, costs, box, parameters,
                                 result.estimate, stats, mcmc_seed, data)
    stats["notes"] = notes + stats["notes"]
    return assemble(spec, evaluate, evaluations, costs, box, parameters, result, stats, extra)


def summariser(costs: CostFunction):
    """Outcome -> per-run cost pieces (the least-squares vector, cost, SSR per variable, minlogp)."""
    def summarise(outcome: Outcome) -> dict[str, np.ndarray]:
        k = len(outcome.ok)
        if outcome.time is None or any(o not in outcome.series for o in costs.outputs):
            nvar = len(costs.terms)
            return {"vector": np.full((k, costs.n), FAILED_RESIDUAL), "cost": np.full(k, np.inf),
                    "ssr": np.full((k, nvar), np.inf), "ssr_unweighted": np.full((k, nvar), np.inf),
                    "minlogp": np.full(k, np.inf)}
        c = costs.compute(outcome.time, {o: outcome.series[o] for o in costs.outputs})
        ok = c.ok & np.asarray(outcome.ok, bool)
        return {"vector": np.where(ok[:, None], c.vector(costs.scales), FAILED_RESIDUAL),
                "cost": np.where(ok, c.cost, np.inf), "ssr": np.where(ok[:, None], c.ssr, np.inf),
                "ssr_unweighted": np.where(ok[:, None], c.ssr_unweighted, np.inf),
                "minlogp": np.where(ok, c.minlogp, np.inf)}
    return summarise


def check_first_run(data: list[Observations], outcome: Outcome | None, costs: CostFunction) -> None:
    """The nominal run's outputs and time span against the data (any model type)."""
    if outcome is None or not bool(outcome.ok[0]):
        return
    if outcome.time is None:
        raise StudyError("calibrate compares the model's time series with the data, but the model "
                         "returned none (a python model returns series as a dict with a `time` key)",
                         path="analysis.data")
    present = {o for o in costs.outputs
               if o in outcome.series and np.isfinite(outcome.series[o][0]).any()}
    check_against_model(data, present | (set(outcome.series) - set(costs.outputs)),
                        (float(outcome.time[0]), float(outcome.time[-1])))


def fit_settings(spec) -> Settings:
    return Settings(method=spec.method, max_evaluations=spec.max_evaluations,
                    tolerance=spec.tolerance, jacobian=spec.jacobian, step=spec.step,
                    generations=spec.generations, population=spec.population, polish=spec.polish)


def fit_from_starts(spec, evaluations: Evaluations, box: Box, settings: Settings, lhs_seed,
                    evolution_seed) -> tuple[FitResult, list[dict]]:
    """The nominal start plus `multistart` Latin hypercube starts, fitted in lockstep."""
    starts = [box.start]
    if spec.multistart and settings.method != "differential-evolution":
        u = sample_unit(spec.multistart, len(box.names), "lhs", lhs_seed)
        starts += list(box.to_natural(u))
    fits = [lambda ask, s=s: fit(ask, s, box, settings, evolution_seed) for s in starts]
    results = lockstep(fits, evaluations)
    best = min(range(len(results)), key=lambda i: (results[i].cost, i))
    table = [{"start": dict(zip(box.names, map(float, s))),
              "estimate": dict(zip(box.names, map(float, r.estimate))), "cost": r.cost,
              "converged": r.converged, "best": i == best}
             for i, (s, r) in enumerate(zip(starts, results))]
    return results[best], table if len(starts) > 1 else []


def assemble(spec, evaluate, evaluations: Evaluations, costs: CostFunction, box: Box, parameters,
             result: FitResult, stats: dict, extra: dict) -> dict[str, Any]:
    """The results block."""
    both = evaluations(np.vstack([box.start, result.estimate]))
    outcome = evaluate(np.vstack([box.start, result.estimate]))  # reused runs: their series
    final_costs = costs.compute(outcome.time, {o: outcome.series[o] for o in costs.outputs}) \
        if outcome.time is not None else None
    before, after = costs.variables_from(both, 0), costs.variables_from(both, 1)
    names = box.names
    at_bound = np.isclose(result.estimate, box.lo) | np.isclose(result.estimate, box.hi)
    fitted = math.isfinite(both["cost"][1])
    if not fitted:  # no finite cost at the estimate: no uncertainty to tell of it either
        stats = {**stats, **{k: np.full_like(stats[k], np.nan)
                             for k in ("std_error", "t", "p", "covariance", "correlation")},
                 "s2": math.nan}
    table = parameter_table(box, result, stats, at_bound)
    results: dict[str, Any] = {
        "method": spec.method,
        "parameters": table,
        "correlation": by_name(stats["correlation"], names),
        "cost": {"initial": float(both["cost"][0]), "final": float(both["cost"][1])},
        "variables": {key: {"N": before[key]["N"], "SSR": after[key]["SSR"],
                            "SSR_unweighted": after[key]["SSR_unweighted"],
                            "scale": before[key]["scale"], "rms_before": before[key]["rms"],
                            "rms_after": after[key]["rms"]} for key in after},
        "minlogp": float(both["minlogp"][1]),
        "minlogp_initial": float(both["minlogp"][0]),
        "converged": bool(result.converged) and fitted,
        "message": result.message,
        "covariance": by_name(stats["covariance"], names),
        "df": int(stats["df"]),
        "residual_variance": float(stats["s2"]),
        "evaluations": {"runs": evaluations.runs, "batches": evaluations.calls},
        "outputs": {t.key: t.output for t in costs.terms},
        "fitted": dict(zip(names, map(float, result.estimate))),
        "fitted_yaml": fitted_yaml(parameters, result.estimate, stats["std_error"]),
        "progress": result.progress,
        "notes": stats["notes"] + outcome.series_notes + [
            f"{n} ended at a bound of its box; widen its bounds if the data allow"
            for n, b in zip(names, at_bound) if b] + limits_past_bounds(box, table)
            + ([] if fitted else [UNFITTED]),
    }
    if final_costs is not None:
        results["curves"] = {o: {"time": outcome.time.tolist(), "initial": outcome.series[o][0].tolist(),
                                 "final": outcome.series[o][1].tolist()} for o in costs.outputs}
        results["residuals"] = costs.residual_table(final_costs, row=1)
        results["fitted_series"] = fitted_series(outcome, 1, [t.x for t in costs.terms])
    results.update({k: v for k, v in extra.items() if v})
    return results


def by_name(matrix: np.ndarray, names: list[str]) -> dict[str, dict[str, float]]:
    return {a: {b: float(matrix[i, j]) for j, b in enumerate(names)} for i, a in enumerate(names)}


def parameter_table(box: Box, result: FitResult, stats: dict, at_bound: np.ndarray) -> dict:
    """initial, estimate, std_error, t, p and 95% confidence limits (Student's t) per parameter."""
    from scipy.stats import t as student

    quantile = student.ppf(0.975, stats["df"]) if stats["df"] > 0 else math.nan
    se = stats["std_error"]
    return {n: {"initial": float(box.start[j]), "estimate": float(result.estimate[j]),
                "std_error": float(se[j]), "t": float(stats["t"][j]), "p": float(stats["p"][j]),
                "lower": float(result.estimate[j] - quantile * se[j]),
                "upper": float(result.estimate[j] + quantile * se[j]),
                "at_bound": bool(at_bound[j])}
            for j, n in enumerate(box.names)}


def limits_past_bounds(box: Box, table: dict[str, dict[str, Any]]) -> list[str]:
    """One note naming each parameter whose confidence limits reach past its bounds: they are
    Wald limits (estimate -+ t std error), kept as computed rather than cut at the bound."""
    past = []
    for name, lo, hi in zip(box.names, box.lo, box.hi):
        row = table[name]
        ends = []
        if row["lower"] < lo:
            ends.append(f"lower {row['lower']:.4g} < {lo:.4g}")
        if row["upper"] > hi:
            ends.append(f"upper {row['upper']:.4g} > {hi:.4g}")
        if ends:
            past.append(f"{name} ({', '.join(ends)})")
    if not past:
        return []
    return [f"the 95% limits of {', '.join(past)} reach past the bounds: they are Wald limits "
            "(estimate -+ t x std error), kept as computed, not cut at the bound; the bound "
            "is not in them (mcmc: gives intervals within the bounds)"]


def fitted_yaml(parameters, estimate: np.ndarray, se: np.ndarray) -> str:
    """A `parameters:` block to paste into the study: each nominal set to its estimate."""
    lines = ["parameters:  # fitted by calibrate: each nominal is the estimate"]
    for (name, p), value, error in zip(parameters.items(), estimate, se):
        spec = p.model_dump(mode="json", exclude_none=True) if hasattr(p, "model_dump") else {}
        spec["nominal"] = float(f"{value:.6g}")
        flow = yaml.safe_dump(spec, default_flow_style=True, sort_keys=False, width=1000).strip()
        note = f"  # std error {error:.3g}" if math.isfinite(error) else ""
        lines.append(f"  {name}: {flow}{note}")
    return "\n".join(lines) + "\n"
