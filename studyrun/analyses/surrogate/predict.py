"""A stored surrogate's prediction at a point in natural units, from analysis.json alone: a PCE
from its terms, a GP refitted (no optimisation) on its stored training set, with a predictive
interval."""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import ValidationError

from studyrun.analyses.surrogate.stored import check
from studyrun.core.errors import StudyError
from studyrun.results.analysis_file import Malformed, first_error


def predict(analysis_results: dict[str, Any], quantity: str, at: dict[str, float],
            level: float = 0.95) -> dict[str, Any]:
    """The surrogate's value of `quantity` at `at` (every input, finite), and for a GP its
    predictive standard deviation and interval at `level`."""
    from pydantic import TypeAdapter
    from scipy import stats

    from studyrun.analyses.surrogate.basis import Germ, design_matrix
    from studyrun.blocks.params import ParameterSpec

    results = analysis_results.get("results", analysis_results)
    fit = results.get(quantity)
    if not isinstance(fit, dict) or "inputs" not in fit:
        raise StudyError(f"no surrogate for quantity {quantity!r}; fitted: "
                         f"{[q for q, r in results.items() if isinstance(r, dict) and 'inputs' in r]}")
    if not 0.0 < level < 1.0:
        raise StudyError(f"--level must lie strictly between 0 and 1, such as 0.95; got {level}")
    stored = check(fit, quantity)  # bounded before anything is computed
    names = list(stored.inputs)
    missing = [n for n in names if n not in at]
    extra = [n for n in at if n not in names]
    if missing or extra:
        raise StudyError(f"--at must give each input of the surrogate once: "
                         f"{', '.join(names)}" + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; not an input: {', '.join(extra)}" if extra else ""))
    if not all(np.isfinite(float(at[n])) for n in names):
        raise StudyError("--at values must be finite numbers")
    adapter = TypeAdapter(ParameterSpec)
    try:
        parameters = [adapter.validate_python(fit["inputs"][n]) for n in names]
    except ValidationError as error:
        raise Malformed(f"results.{quantity}.inputs: not parameters as a study gives them "
                        f"({first_error(error)})") from None
    x = np.array([[float(at[n]) for n in names]])
    outside = [n for n, p in zip(names, parameters) if p.cdf(x[:, names.index(n)])[0] in (0.0, 1.0)]
    out: dict[str, Any] = {"quantity": quantity, "at": {n: float(at[n]) for n in names},
                           "level": level, "std": None, "prediction_interval": None}
    if outside:
        out["note"] = (f"{', '.join(outside)} lie(s) outside or at the edge of the inputs' "
                       "distributions: the surrogate extrapolates there")
    if stored.terms is not None and stored.basis is not None:
        germs = [Germ.from_json(stored.basis[n].model_dump()) for n in names]
        standard = np.column_stack([g.standard(x[:, k], p.cdf)
                                    for k, (g, p) in enumerate(zip(germs, parameters))])
        indices = np.array([[t.index[n] for n in names] for t in stored.terms], dtype=np.int64)
        coefficients = np.array([t.coefficient for t in stored.terms])
        with np.errstate(all="ignore"):
            out["prediction"] = float((design_matrix(standard, germs, indices) @ coefficients)[0])
        rmse = "unknown" if stored.rmse is None else f"{stored.rmse:.4g}"
        out.setdefault("note", f"a PCE gives no predictive interval; its cross-validated RMSE "
                               f"is {rmse}")
        return finite(out)
    from studyrun.analyses.surrogate import gp

    try:
        model = gp.from_json(fit["kernel"])
    except np.linalg.LinAlgError:
        raise Malformed(f"results.{quantity}.kernel: its kernel matrix on the training points is "
                        "not positive definite, as a fitted gp's is") from None
    mean, std = model.predict(gp.scale(fit["kernel"], x), return_std=True)
    half = float(stats.norm.ppf(0.5 + level / 2)) * float(std[0])
    out |= {"prediction": float(mean[0]), "std": float(std[0]),
            "prediction_interval": [float(mean[0]) - half, float(mean[0]) + half]}
    return finite(out)


def finite(out: dict[str, Any]) -> dict[str, Any]:
    """The prediction, refused where it is not a finite number (far outside the inputs' ranges
    a polynomial overflows)."""
    values = [out["prediction"], out["std"] or 0.0, *(out["prediction_interval"] or [])]
    if not all(np.isfinite(values)):
        at = ", ".join(f"{n}={v:g}" for n, v in out["at"].items())
        raise StudyError(f"--at {at}: the surrogate of {out['quantity']!r} gives no finite "
                         f"number there ({out['prediction']}); give a point within the inputs' "
                         "ranges")
    return out
