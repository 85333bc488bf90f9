"""The response-surface fit (analyse step): OLS in coded units, ANOVA, lack of fit, canonical analysis.

Least squares with statsmodels on the terms the design can estimate; terms it cannot (aliased or
constant columns) are dropped and listed, never fitted through a singular matrix. ANOVA uses
partial (extra) sums of squares per term and per order, lack of fit splits the residual into
pure error from replicated points (Montgomery, Design and Analysis of Experiments, ch. 10-11;
Myers, Montgomery & Anderson-Cook, Response Surface Methodology, ch. 2, 6). `predict` gives
confidence and prediction intervals from the stored coefficients and covariance.

Formulas, defaults and edge cases: docs/methods.md, "Response surfaces".
"""

from __future__ import annotations

from itertools import combinations
from typing import Any, Sequence

import numpy as np

from studyrun.analyses.doe.terms import Term, build_matrix, find_estimable, name_term, order_of
from studyrun.core.errors import StudyError
from studyrun.core.numbers import finite_or_none

NO_DF_NOTE = ("no residual degrees of freedom: the surface passes through every run, so "
              "standard errors, t and p are undefined (add runs or use a smaller response)")


def fit_surface(coded: np.ndarray, y: np.ndarray, terms: Sequence[Term]) -> dict[str, Any]:
    """Fit one quantity; the results block of analysis.json for it (see the package docstring)."""
    import statsmodels.api as sm

    matrix = build_matrix(coded, terms)
    kept, aliases = find_estimable(matrix)
    names = [name_term(t) for t in terms]
    X, n = matrix[:, kept], len(y)
    model = sm.OLS(y, X).fit()
    df_resid = n - len(kept)
    ssr = float(np.sum(model.resid ** 2))
    sst = float(np.sum((y - y.mean()) ** 2))
    scale = ssr / df_resid if df_resid > 0 else None
    notes = []
    result: dict[str, Any] = {
        "r2": (1.0 - ssr / sst) if sst > 0 else None,
        "adj_r2": (1.0 - (ssr / df_resid) / (sst / (n - 1))) if sst > 0 and df_resid > 0 else None,
        "rmse": float(np.sqrt(ssr / n)),
        "coefficients": describe_coefficients(model, [names[j] for j in kept], df_resid),
        "dropped_terms": [names[j] for j in sorted(aliases)],
        "dropped_aliases": {names[j]: {names[kept_j]: round(c, 10) for kept_j, c in combo.items()}
                            for j, combo in sorted(aliases.items())},
        "terms": [names[j] for j in kept],
        "n_runs": n,
        "df_resid": df_resid,
        "sigma": float(np.sqrt(scale)) if scale is not None else None,
        "covariance": covariance_of(X, scale),
    }
    if sst == 0:
        notes.append("the response is constant over the runs: R² is undefined")
    if df_resid == 0:
        notes.append(NO_DF_NOTE)
    elif sst > 0 and ssr <= 1e-20 * sst:
        notes.append("the surface fits the runs exactly (to rounding): standard errors, t, F and "
                     "p reflect rounding noise only")
    result["aliases"] = find_aliases(coded, [terms[j] for j in kept], result["terms"])
    result["anova"] = build_anova(X, y, [terms[j] for j in kept], result["terms"], scale)
    result["lack_of_fit"] = test_lack_of_fit(coded, y, ssr, df_resid)
    result["residuals"] = summarise_residuals(model.resid)
    result["notes"] = notes
    return result


def find_aliases(coded: np.ndarray, terms: list[Term], names: list[str]) -> dict[str, dict]:
    """Each fitted term's alias chain in the two-factor interactions left out of the model: the
    rows of the alias matrix A = (X1'X1)^-1 X1'X2 (an estimate's expectation is its term plus A
    times the omitted terms), entries with |A| > 1e-9; an empty chain is a clear estimate."""
    k = coded.shape[1]
    pairs = [tuple(int(j in (a, b)) for j in range(k)) for a, b in combinations(range(k), 2)]
    omitted = [t for t in pairs if t not in terms]
    X1, X2 = build_matrix(coded, terms), build_matrix(coded, omitted)
    alias = np.linalg.solve(X1.T @ X1, X1.T @ X2) if omitted else np.zeros((len(terms), 0))
    return {name: {name_term(t): round(float(a), 10) for t, a in zip(omitted, row) if abs(a) > 1e-9}
            for name, row in zip(names, alias)}


def covariance_of(X: np.ndarray, scale: float | None) -> list[list[float]] | None:
    """sigma² (XᵀX)⁻¹, or None with no residual degrees of freedom."""
    if scale is None:
        return None
    cov = scale * np.linalg.inv(X.T @ X)
    return [[float(v) for v in row] for row in cov]


def describe_coefficients(model: Any, names: list[str], df_resid: int) -> dict[str, dict]:
    """Term -> estimate, std_error, t, p (None when there are no residual degrees of freedom)."""
    out = {}
    for i, name in enumerate(names):
        entry = {"estimate": float(model.params[i]), "std_error": None, "t": None, "p": None}
        if df_resid > 0:
            entry |= {"std_error": finite_or_none(model.bse[i]),
                      "t": finite_or_none(model.tvalues[i]), "p": finite_or_none(model.pvalues[i])}
        out[name] = entry
    return out


def _ssr(X: np.ndarray, y: np.ndarray) -> float:
    coef, *_ = np.linalg.lstsq(X, y, rcond=None)
    return float(np.sum((y - X @ coef) ** 2))


def build_anova(X: np.ndarray, y: np.ndarray, terms: list[Term], names: list[str],
                scale: float | None) -> dict[str, Any]:
    """Partial sums of squares per term and per order, model, residual and total."""
    from scipy import stats

    n, p = X.shape
    df_resid = n - p
    ssr_full = _ssr(X, y)

    def line(columns: list[int]) -> dict[str, Any]:
        keep = [j for j in range(p) if j not in columns]
        ss = max(_ssr(X[:, keep], y) - ssr_full, 0.0) if keep else float(np.sum(y ** 2)) - ssr_full
        df = len(columns)
        row: dict[str, Any] = {"df": df, "ss": ss, "ms": ss / df, "F": None, "p": None}
        if scale:
            row["F"] = row["ms"] / scale
            row["p"] = finite_or_none(stats.f.sf(row["F"], df, df_resid))
        return row

    effects = [j for j, t in enumerate(terms) if sum(t) > 0]
    table = {"terms": {names[j]: line([j]) for j in effects}, "orders": {}}
    for group in ("linear", "interaction", "quadratic", "higher"):
        members = [j for j in effects if order_of(terms[j]) == group]
        if members:
            table["orders"][group] = line(members)
    sst = float(np.sum((y - y.mean()) ** 2))
    if effects:
        table["model"] = line(effects)
    table["residual"] = {"df": df_resid, "ss": ssr_full, "ms": scale}
    table["total"] = {"df": n - 1, "ss": sst}
    return table


def test_lack_of_fit(coded: np.ndarray, y: np.ndarray, ssr: float, df_resid: int) -> dict[str, Any]:
    """Split the residual into pure error (replicated points) and lack of fit; F test when both exist."""
    from scipy import stats

    _, group = np.unique(np.round(coded, 9), axis=0, return_inverse=True)
    group = np.ravel(group)
    means = np.bincount(group, weights=y) / np.bincount(group)
    ss_pe = float(np.sum((y - means[group]) ** 2))
    df_pe = len(y) - int(group.max()) - 1 if len(y) else 0
    df_lof = df_resid - df_pe
    out: dict[str, Any] = {"df_lack_of_fit": df_lof, "df_pure_error": df_pe,
                           "ss_lack_of_fit": max(ssr - ss_pe, 0.0), "ss_pure_error": ss_pe,
                           "F": None, "p": None, "note": None}
    if df_pe == 0:
        out["note"] = "no replicated points: no pure error to test lack of fit against"
    elif df_lof <= 0:
        out["note"] = "no degrees of freedom left for lack of fit"
    elif ss_pe <= 1e-14 * max(1.0, float(np.sum(y ** 2))):
        out["note"] = "replicates agree exactly (a deterministic model): the F test does not apply"
    else:
        out["F"] = (out["ss_lack_of_fit"] / df_lof) / (ss_pe / df_pe)
        out["p"] = finite_or_none(stats.f.sf(out["F"], df_lof, df_pe))
    return out


def summarise_residuals(resid: np.ndarray) -> dict[str, Any]:
    """Smallest, median, largest residual, their RMS and the run with the largest |residual|."""
    resid = np.asarray(resid, dtype=float)
    return {"min": float(resid.min()), "median": float(np.median(resid)), "max": float(resid.max()),
            "rms": float(np.sqrt(np.mean(resid ** 2))), "largest_run": int(np.argmax(np.abs(resid)))}


def find_stationary_point(result: dict[str, Any], k: int, centers: np.ndarray,
                          halves: np.ndarray, names: list[str]) -> dict[str, Any] | None:
    """Canonical analysis of a fitted quadratic: x_s = -B⁻¹b/2, eigenvalues of B, and its kind."""
    coefs = {t: c["estimate"] for t, c in result["coefficients"].items()}
    squares = [f"x{i + 1}^2" for i in range(k)]
    needed = set(squares) | {f"x{i + 1}" for i in range(k)} | {
        f"x{i + 1}*x{j + 1}" for i in range(k) for j in range(i + 1, k)}
    if not all(s in coefs for s in squares) or needed & set(result["dropped_terms"]):
        return None
    b = np.array([coefs.get(f"x{i + 1}", 0.0) for i in range(k)])
    B = np.diag([coefs[s] for s in squares])
    for i in range(k):
        for j in range(i + 1, k):
            B[i, j] = B[j, i] = coefs.get(f"x{i + 1}*x{j + 1}", 0.0) / 2.0
    eigenvalues, eigenvectors = np.linalg.eigh(B)
    if np.min(np.abs(eigenvalues)) <= 1e-10 * max(1.0, np.max(np.abs(eigenvalues))):
        return {"coded": None, "natural": None, "kind": "ridge", "eigenvalues": eigenvalues.tolist(),
                "predicted": None, "note": "B is singular: a ridge, no unique stationary point"}
    x_s = -0.5 * np.linalg.solve(B, b)
    kind = "maximum" if np.all(eigenvalues < 0) else "minimum" if np.all(eigenvalues > 0) else "saddle"
    predicted = coefs.get("1", 0.0) + 0.5 * float(x_s @ b)
    inside = bool(np.all(np.abs(x_s) <= 1.0 + 1e-12))
    note = None if inside else ("It lies outside the bounds, so it is an extrapolation; a "
                                "near-zero eigenvalue suggests a ridge rather than one optimum.")
    return {"coded": {f"x{i + 1}": float(v) for i, v in enumerate(x_s)},
            "natural": {n: float(c + h * v) for n, c, h, v in zip(names, centers, halves, x_s)},
            "kind": kind, "eigenvalues": eigenvalues.tolist(),
            "eigenvectors": eigenvectors.T.tolist(), "predicted": predicted,
            "inside_region": inside, "note": note}


def parse_term(name: str, k: int) -> Term:
    """The powers of a stored term name (`1`, `x2`, `x1*x3`, `x1^2`)."""
    powers = [0] * k
    if name != "1":
        for factor in name.split("*"):
            symbol, _, power = factor.partition("^")
            powers[int(symbol[1:]) - 1] += int(power or 1)
    return tuple(powers)


def predict(analysis_results: dict[str, Any], quantity: str, at: dict[str, float],
            level: float = 0.95) -> dict[str, Any]:
    """Prediction with confidence and prediction intervals at a point given in natural units.

    `analysis_results` is analysis.json (or its `results` block); `at` gives every factor of the
    fit a finite value, and `level` lies strictly between 0 and 1.
    """
    from scipy import stats

    from studyrun.analyses.doe.stored import check

    results = analysis_results.get("results", analysis_results)
    if not isinstance(results.get(quantity), dict) or "coefficients" not in results[quantity]:
        raise StudyError(f"no doe fit for quantity {quantity!r}; fitted: "
                         f"{[q for q in results if not q.startswith('_')]}")
    if not 0.0 < level < 1.0:
        raise StudyError(f"--level must lie strictly between 0 and 1, such as 0.95; got {level}")
    fit = results[quantity]
    check(fit, quantity)  # bounded before anything is computed
    coding = fit["coding"]
    check_point(at, coding)
    coded = np.array([(float(at[n]) - c["center"]) / c["half_range"] for n, c in coding.items()])
    with np.errstate(all="ignore"):
        row = build_matrix(coded[None, :], [parse_term(t, len(coding)) for t in fit["terms"]])[0]
        beta = np.array([fit["coefficients"][t]["estimate"] for t in fit["terms"]])
        value = float(row @ beta)
    if not np.isfinite(value):
        raise StudyError(f"--at: the response surface of {quantity!r} gives no finite number "
                         f"there ({value}); give a point within the factors' ranges")
    out = {"quantity": quantity, "prediction": value, "level": level,
           "at": {n: float(at[n]) for n in coding},
           "coded": {c["symbol"]: float(x) for c, x in zip(coding.values(), coded)},
           "extrapolation": bool(np.any(np.abs(coded) > 1.0 + 1e-12)),
           "std_error": None, "confidence": None, "prediction_interval": None}
    if fit.get("covariance") is None or not fit.get("df_resid") or fit.get("sigma") is None:
        out["note"] = NO_DF_NOTE
        return out
    se = float(np.sqrt(max(row @ np.array(fit["covariance"]) @ row, 0.0)))
    tq = float(stats.t.ppf(0.5 + level / 2.0, fit["df_resid"]))
    spread = float(np.sqrt(se ** 2 + fit["sigma"] ** 2))
    out |= {"std_error": se, "confidence": [value - tq * se, value + tq * se],
            "prediction_interval": [value - tq * spread, value + tq * spread]}
    return out


def check_point(at: dict[str, float], coding: dict[str, dict]) -> None:
    """Refuse a point with a factor the fit lacks, without one it has, or with a non-finite value."""
    factors = ", ".join(coding)
    unknown = [name for name in at if name not in coding]
    if unknown:
        raise StudyError(f"--at: unknown factor {', '.join(map(repr, unknown))}; the fit's "
                         f"factors are {factors}")
    missing = [name for name in coding if name not in at]
    if missing:
        centres = ",".join(f"{n}={coding[n]['center']:g}" for n in missing)
        raise StudyError(f"--at: no value for {', '.join(map(repr, missing))}; give every factor "
                         f"of the fit ({factors}), such as --at {centres} for the centre")
    bad = [f"{name}={value}" for name, value in at.items() if not np.isfinite(value)]
    if bad:
        raise StudyError(f"--at: {', '.join(bad)} is not a finite number; give a finite value")
