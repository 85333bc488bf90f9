"""Gaussian-process surrogates: scikit-learn's GaussianProcessRegressor with an anisotropic
Matern 5/2 kernel times a constant, plus a white-noise term, on inputs scaled affinely so that
each parameter's box (its 0.1% to 99.9% range where unbounded) is [0, 1]; stored as JSON (kernel
hyperparameters and training set), never pickled.

Formulas: docs/methods.md, "Surrogate models".
"""

from __future__ import annotations

import math
import warnings
from functools import partial
from typing import Any

import numpy as np

NU = 2.5
RESTARTS = 4  # optimiser restarts from random hyperparameters, beyond the first start
RESTARTS_SUBSAMPLED = 1  # the same past SUBSAMPLE runs (each start costs seconds; issue 33)
MAX_TRAINING = 5000  # training points predict refits on (n x n kernel, n^3 factorisation)
# Past SUBSAMPLE runs the hyperparameters are fitted on a seeded subsample of that many, then
# fixed for one fit on all runs: the likelihood's optimisation costs n^3 an evaluation, and its
# optimum moves little past a few hundred runs (benchmarks/bench_surrogate.py --only fits).
SUBSAMPLE = 400
PREDICTED_CELLS = 1 << 25  # points x training runs a prediction holds at once (256 MB)
KERNEL_CELLS = 1 << 18  # of which the kernel's arithmetic works on this many at a time (2 MB)


def kernel(dimension: int, scales=None, signal: float = 1.0, noise: float = 1e-6, fixed=False,
           longest: float = 1e3):
    """Constant * Matern(nu 5/2, one length scale per input, at most `longest`) + White noise."""
    from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

    bounds = "fixed" if fixed else None
    scales = np.full(dimension, 0.3) if scales is None else np.asarray(scales, dtype=float)
    return (ConstantKernel(signal, bounds or (1e-4, 1e4))
            * Matern(scales, bounds or (1e-3, longest), nu=NU)
            + WhiteKernel(noise, bounds or (1e-10, 1.0)))


def fit(scaled: np.ndarray, y: np.ndarray, seed: int, longest: float = 1e3):
    """A regressor fitted by maximum likelihood (length scales at most `longest`), from
    RESTARTS + 1 seeded starts; past
    SUBSAMPLE runs, from RESTARTS_SUBSAMPLED + 1 starts on a seeded subsample of SUBSAMPLE runs,
    then on all runs with those hyperparameters fixed."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor

    rows = subsample(len(y), seed)
    restarts = RESTARTS if len(rows) == len(y) else RESTARTS_SUBSAMPLED
    model = GaussianProcessRegressor(kernel(scaled.shape[1], longest=longest),
                                     normalize_y=True, n_restarts_optimizer=restarts,
                                     random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(scaled[rows], y[rows])
    if len(rows) == len(y):
        return model
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return GaussianProcessRegressor(model.kernel_, normalize_y=True,
                                        optimizer=_kept).fit(scaled, y)


def _kept(objective, theta, bounds):
    """The optimiser of a fit whose hyperparameters are already chosen: they are kept, and the
    likelihood, which scikit-learn's fit with `optimizer=None` computes again (a second n x n
    kernel and Cholesky factorisation), is not needed."""
    return theta, np.nan


def _capped(evaluations: int, objective: Any, theta: np.ndarray, bounds: Any) -> tuple[Any, float]:
    """scikit-learn's L-BFGS-B of the likelihood, stopped after `evaluations` evaluations."""
    from scipy.optimize import minimize

    found = minimize(objective, theta, method="L-BFGS-B", jac=True, bounds=bounds,
                     options={"maxfun": evaluations})
    return found.x, float(found.fun)


def subsample(n: int, seed: int) -> np.ndarray:
    """The training rows the hyperparameters are fitted on: all, or SUBSAMPLE drawn with the
    fit's seed (in their order)."""
    if n <= SUBSAMPLE:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, SUBSAMPLE, replace=False))


def predict(model, points: np.ndarray) -> np.ndarray:
    """The posterior mean at `points`: scikit-learn's arithmetic step for step, on the same
    PREDICTED_CELLS rows at a time (BLAS rounds a product by its shape), the same numbers
    without its temporaries."""
    points = np.asarray(points, dtype=float)
    rows = max(1, PREDICTED_CELLS // max(1, len(model.X_train_)))
    mean = np.empty(len(points))
    for start in range(0, len(points), rows):
        mean[start:start + rows] = cross_kernel(model, points[start:start + rows]) @ model.alpha_
    return model._y_train_std * mean + model._y_train_mean


def cross_kernel(model, points: np.ndarray) -> np.ndarray:
    """The fitted kernel between `points` and the training runs, as scikit-learn computes it
    (its white noise adds nothing between them): signal x Matern of the inputs divided by their
    length scales."""
    product = model.kernel_.k1
    scales = np.squeeze(product.k2.length_scale).astype(float)
    return matern(np.asarray(points, dtype=float) / scales, model.X_train_ / scales,
                  product.k1.constant_value)


def predict_with_std(model, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's `predict(points, return_std=True)` of a fitted one-output model, its
    arithmetic step for step without its input checks, which cost more than the prediction
    itself in the thousands of calls of few points that maximise an acquisition."""
    from scipy.linalg import solve_triangular

    cross = cross_kernel(model, points)
    mean = model._y_train_std * (cross @ model.alpha_) + model._y_train_mean
    factor = solve_triangular(model.L_, cross.T, lower=True, check_finite=False)
    variance = model.kernel_.diag(points).copy()
    variance -= np.einsum("ij,ji->i", factor.T, factor)
    variance[variance < 0] = 0.0  # rounding (scikit-learn warns and does the same)
    return mean, np.sqrt(variance * model._y_train_std ** 2)


def matern(left: np.ndarray, right: np.ndarray, signal: float) -> np.ndarray:
    """signal * Matern 5/2 between rows of inputs already divided by their length scales,
    (1 + K + K**2 / 3) * exp(-K) with K = sqrt(5) * distance, as scikit-learn computes it."""
    from scipy.spatial.distance import cdist

    out = np.empty((len(left), len(right)))
    step = max(1, KERNEL_CELLS // max(1, len(right)))
    for start in range(0, len(left), step):
        k = out[start:start + step]
        cdist(left[start:start + step], right, out=k)
        k *= math.sqrt(5)
        decay = np.exp(np.negative(k))
        square = np.square(k)
        square /= 3.0
        k += 1.0
        k += square
        k *= decay
        k *= signal
    return out


def refit(model, scaled: np.ndarray, y: np.ndarray, restarts: int = 0, seed: int | None = None,
          evaluations: int | None = None):
    """A fit on other training data (a cross-validation fold, a round's new runs), its optimiser
    started from `model`'s hyperparameters and from `restarts` random ones drawn with `seed`,
    each start stopped after `evaluations` of the likelihood if given."""
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor

    optimizer: Any = "fmin_l_bfgs_b" if evaluations is None else partial(_capped, evaluations)
    again = GaussianProcessRegressor(model.kernel_, normalize_y=True, n_restarts_optimizer=restarts,
                                     random_state=seed, optimizer=optimizer)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return again.fit(scaled, y)


def _frozen(fitted):
    params = describe(fitted)
    return kernel(len(params["length_scales"]), params["length_scales"], params["signal_variance"],
                  params["noise_variance"], fixed=True)


def describe(fitted_kernel) -> dict[str, Any]:
    """A fitted kernel's hyperparameters, on normalised outputs (unit variance)."""
    product, white = fitted_kernel.k1, fitted_kernel.k2
    return {"type": "constant * matern + white", "nu": NU,
            "signal_variance": float(product.k1.constant_value),
            "length_scales": np.atleast_1d(product.k2.length_scale).astype(float).tolist(),
            "noise_variance": float(white.noise_level)}


def as_json(model, names: list[str], box: np.ndarray, scaled: np.ndarray,
            y: np.ndarray) -> dict[str, Any]:
    """Everything prediction needs: hyperparameters, the box that scales the inputs to [0, 1],
    and the training set (scaled inputs)."""
    params = describe(model.kernel_)
    return {**params, "length_scales": dict(zip(names, params["length_scales"])),
            "box": {n: [float(lo), float(hi)] for n, (lo, hi) in zip(names, box)},
            "training_inputs": scaled.tolist(), "training_outputs": y.tolist()}


def scale(data: dict[str, Any], x: np.ndarray) -> np.ndarray:
    """Natural values to the scaled inputs of the stored GP `data`."""
    box = np.array(list(data["box"].values()), dtype=float)
    return (x - box[:, 0]) / (box[:, 1] - box[:, 0])


def from_json(data: dict[str, Any]):
    """The regressor `as_json` describes, refitted (no optimisation) on its training set."""
    from sklearn.gaussian_process import GaussianProcessRegressor

    scales = list(data["length_scales"].values())
    model = GaussianProcessRegressor(kernel(len(scales), scales, data["signal_variance"],
                                            data["noise_variance"], fixed=True),
                                     normalize_y=True, optimizer=None)
    return model.fit(np.array(data["training_inputs"], dtype=float),
                     np.array(data["training_outputs"], dtype=float))


def posterior_draws(model, points: np.ndarray, draws: int, seed: int) -> np.ndarray:
    """Joint draws of the latent function (noise left out) at `points`: one column per draw."""
    mean, cov = model.predict(points, return_cov=True)
    noise = describe(model.kernel_)["noise_variance"] * float(np.atleast_1d(model._y_train_std)[0]) ** 2
    cov = cov - noise * np.eye(len(points))
    jitter = 1e-10 * max(float(np.trace(cov)) / len(points), 1e-300)
    for _ in range(8):
        try:
            factor = np.linalg.cholesky(cov + jitter * np.eye(len(points)))
            break
        except np.linalg.LinAlgError:
            jitter *= 10
    else:  # not positive definite even so (rounding, past thousands of runs): pivoted Cholesky
        factor = semidefinite_factor(cov)
    rng = np.random.default_rng(seed)
    return mean[:, None] + factor @ rng.standard_normal((len(points), draws))


def semidefinite_factor(cov: np.ndarray) -> np.ndarray:
    """F with F F' = cov on its numerical rank, by Cholesky with complete pivoting (LAPACK
    dpstrf), which stops at the first pivot below rounding: a fraction of an eigendecomposition's
    cost."""
    from scipy.linalg.lapack import dpstrf

    lower, pivots, rank, info = dpstrf(cov, lower=1)
    if info < 0:
        raise np.linalg.LinAlgError(f"dpstrf: argument {-info} is invalid")
    factor = np.zeros((len(cov), len(cov)))
    factor[pivots - 1, :rank] = np.tril(lower)[:, :rank]
    return factor


def greedy_points(model, candidates: np.ndarray, count: int, trained: np.ndarray) -> list[int]:
    """The rows of `count` candidates chosen one by one where the predictive variance is
    largest, each chosen point then added to the training inputs (the variance does not depend
    on the outputs)."""
    from sklearn.gaussian_process import GaussianProcessRegressor

    chosen: list[int] = []
    inputs = trained
    fixed = _frozen(model.kernel_)
    for _ in range(count):
        helper = GaussianProcessRegressor(fixed, optimizer=None).fit(inputs, np.zeros(len(inputs)))
        _, std = helper.predict(candidates, return_std=True)
        std[chosen] = -1.0
        pick = int(np.argmax(std))
        chosen.append(pick)
        inputs = np.vstack([inputs, candidates[pick]])
    return chosen


def conditioned(model, scaled: np.ndarray, y: np.ndarray, normalize: bool = True):
    """`model`'s hyperparameters, fixed, fitted on other training data without optimisation
    (Bayesian optimisation's constant liar: the same GP told of the points already chosen);
    without `normalize`, y is taken as it is, its prior mean 0."""
    from sklearn.gaussian_process import GaussianProcessRegressor

    return GaussianProcessRegressor(_frozen(model.kernel_), normalize_y=normalize,
                                    optimizer=None).fit(scaled, y)
