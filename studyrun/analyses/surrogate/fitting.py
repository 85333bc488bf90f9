"""Fitting one quantity's surrogate, validating it by cross-validation, and the moments and
Sobol' indices it gives, with their intervals: the numbers of `results.<quantity>`.

Formulas: docs/methods.md, "Surrogate models".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from studyrun.analyses.salib.saltelli import saltelli_unit
from studyrun.analyses.surrogate import gp, pce
from studyrun.analyses.surrogate.basis import Germ, design_matrix, germ_for
from studyrun.core.threads import ANALYSIS_THREADS, held_to_cores

TRUSTED_Q2 = 0.9  # below this cross-validated Q2 the indices are flagged, not trusted
TRUSTED_HALF_WIDTH = 0.02  # `trusted` also asks every S1 and ST interval to be this narrow
RESOLUTION = 0.001  # no index interval is narrower: below it the bootstrap was seen to under-cover
GP_BASE = 8192  # base samples of the Saltelli design on which the GP's posterior mean is read
GP_DRAW_BASE = 256  # base samples of the design on which posterior draws are taken
CORRELATED_DRAWS = 1 << 16  # correlated Sobol' points on which the moments are then averaged
INDEX_KEYS = ("S1", "S1_conf", "ST", "ST_conf", "S2", "S2_conf")
# One BLAS thread, as the analysis step: a GP's hyperparameters moved by 0.1% between one thread
# and two (its optimiser follows the rounding), and on a busy machine a second OpenBLAS thread
# cost 5 to 16 times the CPU of a fit (benchmarks/bench_surrogate.py --only fits).
FIT_THREADS = ANALYSIS_THREADS


@dataclass(frozen=True)
class Settings:
    """The analysis block's fitting keys, as the fitting needs them."""

    method: str  # pce | gp
    degree: int | None  # None: chosen by corrected leave-one-out error
    q: float
    fit: str  # lars | ols
    folds: int | None  # None: leave-one-out
    second_order: bool
    confidence: float
    resamples: int


@dataclass
class Fitted:
    """One quantity's fitted surrogate: its results block and what adaptivity needs."""

    results: dict[str, Any]
    q2: float
    model: Any = None  # the GP regressor, for choosing the next runs
    surrogate: Any = None  # natural values (rows) -> the surrogate's predictions


class Inputs:
    """The varied parameters, their correlation (None: independent), and their maps to the unit
    cube and the polynomial variables."""

    def __init__(self, parameters: dict[str, Any], correlation: np.ndarray | None = None) -> None:
        self.names = list(parameters)
        self.correlation = correlation
        self.parameters = list(parameters.values())
        self.germs = [germ_for(p) for p in self.parameters]

        self.box = np.array([p.bounds() for p in self.parameters], dtype=float)

    def natural(self, unit: np.ndarray) -> np.ndarray:
        """Points of the unit cube (probability space) to natural values, through each ppf."""
        return np.column_stack([p.ppf(unit[:, k]) for k, p in enumerate(self.parameters)])

    def scaled(self, x: np.ndarray) -> np.ndarray:
        """Natural values scaled affinely so that each parameter's box is [0, 1] (a GP's
        inputs: an affine map keeps the model as smooth as it is)."""
        return (x - self.box[:, 0]) / (self.box[:, 1] - self.box[:, 0])

    def standard(self, x: np.ndarray) -> np.ndarray:
        return np.column_stack([g.standard(x[:, k], p.cdf)
                                for k, (g, p) in enumerate(zip(self.germs, self.parameters))])

    def as_json(self) -> dict[str, Any]:
        return {n: p.model_dump(mode="json", by_alias=True, exclude_none=True)
                for n, p in zip(self.names, self.parameters)}


def folds_of(n: int, folds: int, seed: int) -> np.ndarray:
    """Each training row's fold: a seeded permutation dealt round-robin."""
    order = np.random.default_rng(seed).permutation(n)
    fold = np.empty(n, dtype=np.int64)
    fold[order] = np.arange(n) % folds
    return fold


def fit_quantity(x: np.ndarray, y: np.ndarray, inputs: Inputs, settings: Settings,
                 seed: int) -> Fitted:
    """The surrogate of one quantity from its successful runs (rows of x, natural units), on
    FIT_THREADS BLAS threads."""
    with held_to_cores(FIT_THREADS):
        return _fit_quantity(x, y, inputs, settings, seed)


def _fit_quantity(x: np.ndarray, y: np.ndarray, inputs: Inputs, settings: Settings,
                  seed: int) -> Fitted:
    fit_seed, fold_seed, draw_seed = (int(s) for s in
                                      np.random.SeedSequence(seed).generate_state(3))
    if settings.method == "pce":
        results, predicted, expansion = fit_pce(x, y, inputs, settings, fold_seed, draw_seed)
        model = None

        def surrogate(x):
            return expansion.predict(inputs.standard(x), inputs.germs)
    else:
        results, predicted, model = fit_gp(x, y, inputs, settings, fit_seed, fold_seed, draw_seed)

        def surrogate(x):
            return gp.predict(model, inputs.scaled(x))
    q2, rmse = scores(y, predicted)
    results = widened(results, q2)
    if inputs.correlation is not None:
        results = of_correlated_inputs(results, surrogate, inputs, draw_seed, q2)
    results = {"q2": q2, "rmse": rmse, **results, "samples": int(len(y)),
               "validation": {"method": "leave-one-out" if settings.folds is None
                              else f"{settings.folds}-fold",
                              "observed": y.tolist(), "predicted": predicted.tolist()}}
    why = distrust(results, q2)
    results["trusted"] = why is None
    if why is not None:
        results.setdefault("warnings", []).append(why)
    return Fitted(results, q2, model, surrogate)


def widened(results: dict[str, Any], q2: float) -> dict[str, Any]:
    """The indices' half-widths with what the spread of refits or draws cannot see added: 1 - Q2,
    the share of the model's variance the surrogate misses (were all of it in one index, that
    index would move by about as much), then at least RESOLUTION and at most 1."""
    missing = 1.0 if not np.isfinite(q2) else max(0.0, 1.0 - q2)

    def wider(value):
        if isinstance(value, dict):
            return {k: wider(v) for k, v in value.items()}
        return min(1.0, max(RESOLUTION, value + missing)) if np.isfinite(value) else value

    return {k: wider(v) if k in ("S1_conf", "ST_conf", "S2_conf") else v
            for k, v in results.items()}


def distrust(results: dict[str, Any], q2: float) -> str | None:
    """Why the indices are not to be trusted (a warning), or None: trusted asks a cross-validated
    Q2 of TRUSTED_Q2 and every S1 and ST interval within +- TRUSTED_HALF_WIDTH."""
    if not q2 >= TRUSTED_Q2:
        return (f"the cross-validated Q2 is {q2:.3f}, below {TRUSTED_Q2}: the surrogate does not "
                "reproduce the model well enough to trust its indices; add runs (`until:`), "
                "raise the degree, or try the other method")
    widths = [(w if np.isfinite(w) else np.inf, f"{key[:2]} of {name}")
              for key in ("S1_conf", "ST_conf") for name, w in results.get(key, {}).items()
              if w is not None]
    widest, which = max(widths, default=(0.0, ""))
    if widest > TRUSTED_HALF_WIDTH:
        return (f"the interval of {which} is +-{widest:.3f}, wider than +-{TRUSTED_HALF_WIDTH}: "
                f"the {results['samples']} runs do not pin the indices down (Q2 {q2:.4f}); add "
                "runs (`until:` with a higher q2) to trust them")
    return None


def scores(y: np.ndarray, predicted: np.ndarray) -> tuple[float, float]:
    """Q2 = 1 - PRESS / total sum of squares, and the root mean squared prediction error."""
    press = float(np.sum((y - predicted) ** 2))
    total = float(np.sum((y - y.mean()) ** 2))
    q2 = 1.0 - press / total if total > 0 else (1.0 if press == 0 else -np.inf)
    return q2, float(np.sqrt(press / len(y)))


def fit_pce(x, y, inputs: Inputs, settings: Settings, fold_seed: int, draw_seed: int):
    z = inputs.standard(x)
    germs = inputs.germs
    expansion, notes = pce.fit(z, y, germs, settings.degree, settings.q, settings.fit)
    if settings.folds is None:
        predicted = loo_predictions(design_matrix(z, germs, expansion.indices), y)
    else:
        predicted = np.empty_like(y)
        fold = folds_of(len(y), settings.folds, fold_seed)
        for k in range(settings.folds):
            held = fold == k
            part = pce.fit_degree(z[~held], y[~held], germs, expansion.degree, settings.q,
                                  settings.fit)
            predicted[held] = part.predict(z[held], germs)
    mean, variance, first, total, pairs = pce.moments_and_indices(
        expansion.indices, expansion.coefficients, settings.second_order)
    conf = pce_intervals(z, y, germs, expansion, settings, draw_seed)
    # a least-squares fit of P terms to n runs spreads its refits too little by sqrt((n - P) / n)
    scale = np.sqrt(len(y) / max(len(y) - len(expansion.indices), 1))
    conf = {k: v * scale for k, v in conf.items()}
    names = inputs.names
    results: dict[str, Any] = {
        "mean": mean, "std": float(np.sqrt(variance)),
        **index_block(names, first, total, pairs, conf),
        "degree": expansion.degree, "candidate_terms": expansion.candidates,
        "inputs": inputs.as_json(),
        "basis": {n: g.as_json() for n, g in zip(names, germs)},
        "terms": [{"index": dict(zip(names, map(int, row))), "coefficient": float(c)}
                  for row, c in zip(expansion.indices, expansion.coefficients)],
    }
    if notes:
        results["warnings"] = notes
    return results, predicted, expansion


def of_correlated_inputs(results: dict[str, Any], surrogate, inputs: Inputs,
                         seed: int, q2: float) -> dict[str, Any]:
    """Correlated inputs: the mean and standard deviation of the surrogate over correlated draws
    (its own moments are those of independent inputs), the Sobol' indices null, with a warning
    (they apportion variance among independent inputs only), and its Shapley effects and
    Kucherenko's indices in their place."""
    from studyrun.blocks.params import correlate_unit, sample_unit
    from studyrun.blocks.params.correlation import correlations

    unit = sample_unit(CORRELATED_DRAWS, len(inputs.names), "sobol", np.random.SeedSequence(seed))
    values = surrogate(inputs.natural(correlate_unit(unit, inputs.correlation, "sobol")))
    results = {**results, "mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)),
               "correlation": correlations(inputs.correlation, inputs.names)}
    for key in INDEX_KEYS:
        if key in results:
            results[key] = {a: (None if not isinstance(v, dict) else dict.fromkeys(v))
                            for a, v in results[key].items()}
    results |= dependent_indices(surrogate, inputs, seed, q2)
    results["warnings"] = [*results.get("warnings", []),
                           "the inputs are correlated: Sobol' indices apportion the variance of "
                           "independent inputs only, so S1 and ST are null; `shapley` and "
                           "`kucherenko` give the surrogate's Shapley effects and Kucherenko's "
                           "indices for dependent inputs; the mean and std are those of the "
                           f"surrogate over {CORRELATED_DRAWS} correlated draws"]
    return results


def dependent_indices(surrogate, inputs: Inputs, seed: int, q2: float,
                      confidence: float = 0.95) -> dict[str, Any]:
    """Shapley effects and Kucherenko's indices of the surrogate under the inputs' copula
    (analyses/shapley/estimator.py, on many cheap evaluations), their half-widths widened by
    1 - Q2 as the Sobol' indices' are; the output's variance."""
    from studyrun.analyses.shapley.estimator import on_surrogate

    found = on_surrogate(surrogate, inputs.natural, len(inputs.names), inputs.correlation,
                         confidence, seed)
    from studyrun.core.numbers import finite_or_none

    def named(values) -> dict[str, float | None]:
        return {n: finite_or_none(v) for n, v in zip(inputs.names, values)}

    missing = 1.0 if not np.isfinite(q2) else max(0.0, 1.0 - q2)
    conf = {k: np.minimum(1.0, np.maximum(RESOLUTION, found[k] + missing))
            for k in ("shapley_conf", "S1_conf", "ST_conf")}
    return {"shapley": named(found["shapley"]), "shapley_conf": named(conf["shapley_conf"]),
            "variance": found["variance"],
            "kucherenko": {k: named(conf[k] if k.endswith("_conf") else found[k])
                           for k in ("S1", "S1_conf", "ST", "ST_conf")}}


def loo_predictions(psi: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Leave-one-out predictions of a least-squares fit, from its residuals and leverages."""
    q, _ = np.linalg.qr(psi)
    residuals = y - q @ (q.T @ y)
    leverage = np.sum(q * q, axis=1)
    return y - residuals / np.maximum(1.0 - leverage, 1e-12)


def pce_intervals(z, y, germs: list[Germ], expansion: pce.Expansion, settings: Settings,
                  seed: int) -> dict[str, np.ndarray]:
    """Half-widths of the indices' intervals: the spread of the indices of least-squares refits
    of the retained terms on bootstrap resamples of the runs."""
    psi = design_matrix(z, germs, expansion.indices)
    rng = np.random.default_rng(seed)
    n = len(y)
    draws: dict[str, list] = {"S1": [], "ST": [], "S2": []}
    for _ in range(settings.resamples):
        counts = np.bincount(rng.integers(0, n, n), minlength=n).astype(float)
        coefficients = pce.refit(psi, y, counts)
        _, _, first, total, pairs = pce.moments_and_indices(expansion.indices, coefficients,
                                                            settings.second_order)
        draws["S1"].append(first)
        draws["ST"].append(total)
        draws["S2"].append(pairs)
    return spread(draws, settings)


def spread(draws: dict[str, list], settings: Settings) -> dict[str, np.ndarray]:
    """z times the standard deviation across draws, as SALib reports its bootstrap intervals."""
    from scipy import stats

    z = float(stats.norm.ppf(0.5 + settings.confidence / 2))
    out = {key: z * np.std(np.array(values, dtype=float), axis=0, ddof=1)
           for key, values in draws.items() if values and values[0] is not None}
    return out


def index_block(names: list[str], first, total, pairs, conf: dict[str, np.ndarray]) -> dict:
    """S1, S1_conf, ST, ST_conf (and S2, S2_conf) keyed by parameter, as the sobol analysis."""
    block: dict[str, Any] = {
        "S1": dict(zip(names, map(float, first))), "S1_conf": dict(zip(names, map(float, conf["S1"]))),
        "ST": dict(zip(names, map(float, total))), "ST_conf": dict(zip(names, map(float, conf["ST"]))),
    }
    if pairs is not None:
        block["S2"] = upper(names, pairs)
        block["S2_conf"] = upper(names, conf["S2"])
    return block


def upper(names: list[str], matrix: np.ndarray) -> dict[str, dict[str, float]]:
    """a -> b -> value for each pair with b after a, as the sobol analysis writes S2."""
    return {a: {b: float(matrix[i, j]) for j, b in enumerate(names) if j > i}
            for i, a in enumerate(names[:-1])}


def fit_gp(x, y, inputs: Inputs, settings: Settings, fit_seed: int, fold_seed: int,
           draw_seed: int):
    scaled = inputs.scaled(x)
    model = gp.fit(scaled, y, fit_seed)
    if settings.folds is None:
        predicted = gp_loo(model, y)
    else:
        predicted = np.empty_like(y)
        fold = folds_of(len(y), settings.folds, fold_seed)
        for k in range(settings.folds):
            held = fold == k
            part = gp.refit(model, scaled[~held], y[~held])
            predicted[held] = part.predict(scaled[held])
    d = len(inputs.names)

    def at_unit(unit: np.ndarray) -> np.ndarray:
        return inputs.scaled(inputs.natural(unit))

    first, total, pairs, mean, std = gp_indices(lambda u: gp.predict(model, at_unit(u)), d, GP_BASE,
                                                settings.second_order, draw_seed)
    draws = gp_index_draws(model, at_unit, d, settings, draw_seed)
    results = {"mean": mean, "std": std,
               **index_block(inputs.names, first, total, pairs, spread(draws, settings)),
               "inputs": inputs.as_json(),
               "kernel": gp.as_json(model, inputs.names, inputs.box, scaled, y)}
    return results, predicted, model


def gp_loo(model, y: np.ndarray) -> np.ndarray:
    """Closed-form leave-one-out predictions at the fitted hyperparameters (Dubrule 1983;
    Rasmussen and Williams 2006, eq. 5.12): residual i is alpha_i / (K^-1)_ii, the diagonal
    being the column sums of squares of L^-1 (one triangular inverse, not the whole of K^-1)."""
    from scipy.linalg.lapack import dtrtri

    inverse, info = dtrtri(model.L_, lower=1)
    if info != 0:
        raise np.linalg.LinAlgError(f"the GP's Cholesky factor is singular (LAPACK info {info})")
    diagonal = np.einsum("ij,ij->j", inverse, inverse)
    scale = float(np.atleast_1d(model._y_train_std)[0])
    return y - model.alpha_.ravel() / diagonal * scale


def split_blocks(values: np.ndarray, d: int, second_order: bool):
    """SALib's A, B, AB (and BA) from outputs in Saltelli order (values: rows x columns)."""
    step = 2 * d + 2 if second_order else d + 2
    a, b = values[0::step], values[step - 1::step]
    ab = np.stack([values[j + 1::step] for j in range(d)], axis=1)
    ba = np.stack([values[j + 1 + d::step] for j in range(d)], axis=1) if second_order else None
    return a, b, ab, ba


def sobol_estimates(values: np.ndarray, d: int, second_order: bool):
    """First, total (and second-order) indices by SALib's estimators, for each column."""
    from SALib.analyze.sobol import first_order, total_order
    from SALib.analyze.sobol import second_order as s2

    a, b, ab, ba = split_blocks(values, d, second_order)
    first = np.array([first_order(a, ab[:, j], b) for j in range(d)])
    total = np.array([total_order(a, ab[:, j], b) for j in range(d)])
    pairs = None
    if second_order:
        pairs = np.zeros((d, d) + values.shape[1:])
        for i in range(d):
            for j in range(i + 1, d):
                pairs[i, j] = s2(a, ab[:, i], ab[:, j], ba[:, i], b)
    return first, total, pairs


def gp_indices(predict, d: int, base: int, second_order: bool, seed: int):
    """Indices, mean and standard deviation of the posterior mean, by a Saltelli design."""
    unit = saltelli_unit(d, base, second_order, seed)
    values = predict(unit)
    first, total, pairs = sobol_estimates(values[:, None], d, second_order)
    steps = 2 * d + 2 if second_order else d + 2
    independent = np.concatenate([values[0::steps], values[steps - 1::steps]])
    return (first[:, 0], total[:, 0], None if pairs is None else pairs[..., 0],
            float(independent.mean()), float(independent.std(ddof=1)))


def gp_index_draws(model, at_unit, d: int, settings: Settings, seed: int) -> dict[str, list]:
    """Indices of joint posterior draws of the function on a smaller Saltelli design."""
    unit = saltelli_unit(d, GP_DRAW_BASE, settings.second_order, seed + 1)
    values = gp.posterior_draws(model, at_unit(unit), settings.resamples, seed)
    first, total, pairs = sobol_estimates(values, d, settings.second_order)
    draws = {"S1": list(first.T), "ST": list(total.T), "S2": []}
    if pairs is not None:
        draws["S2"] = list(np.moveaxis(pairs, -1, 0))
    return draws
