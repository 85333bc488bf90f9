"""A stored surrogate's prediction at a point in natural units, from analysis.json alone: a PCE
from its terms, a GP refitted (no optimisation) on its stored training set, with a predictive
interval."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core.errors import StudyError


def predict(analysis_results: dict[str, Any], quantity: str, at: dict[str, float],
            level: float = 0.95) -> dict[str, Any]:
    """The surrogate's value of `quantity` at `at` (every input, finite), and for a GP its
    predictive standard deviation and interval at `level`."""
    from pydantic import TypeAdapter
    from scipy import stats

    from ...params import ParameterSpec
    from .basis import Germ, design_matrix

    results = analysis_results.get("results", analysis_results)
    fit = results.get(quantity)
    if not isinstance(fit, dict) or "inputs" not in fit:
        raise StudyError(f"no surrogate for quantity {quantity!r}; fitted: "
                         f"{[q for q, r in results.items() if isinstance(r, dict) and 'inputs' in r]}")
    if not 0.0 < level < 1.0:
        raise StudyError(f"--level must lie strictly between 0 and 1, such as 0.95; got {level}")
    names = list(fit["inputs"])
    missing = [n for n in names if n not in at]
    extra = [n for n in at if n not in names]
    if missing or extra:
        raise StudyError(f"--at must give each input of the surrogate once: "
                         f"{', '.join(names)}" + (f"; missing {', '.join(missing)}" if missing else "")
                         + (f"; not an input: {', '.join(extra)}" if extra else ""))
    if not all(np.isfinite(float(at[n])) for n in names):
        raise StudyError("--at values must be finite numbers")
    adapter = TypeAdapter(ParameterSpec)
    parameters = [adapter.validate_python(fit["inputs"][n]) for n in names]
    x = np.array([[float(at[n]) for n in names]])
    outside = [n for n, p in zip(names, parameters) if p.cdf(x[:, names.index(n)])[0] in (0.0, 1.0)]
    out: dict[str, Any] = {"quantity": quantity, "at": {n: float(at[n]) for n in names},
                           "level": level, "std": None, "prediction_interval": None}
    if outside:
        out["note"] = (f"{', '.join(outside)} lie(s) outside or at the edge of the inputs' "
                       "distributions: the surrogate extrapolates there")
    if "terms" in fit:
        germs = [Germ.from_json(fit["basis"][n]) for n in names]
        standard = np.column_stack([g.standard(x[:, k], p.cdf)
                                    for k, (g, p) in enumerate(zip(germs, parameters))])
        indices = np.array([[t["index"][n] for n in names] for t in fit["terms"]], dtype=np.int64)
        coefficients = np.array([t["coefficient"] for t in fit["terms"]])
        out["prediction"] = float((design_matrix(standard, germs, indices) @ coefficients)[0])
        out.setdefault("note", f"a PCE gives no predictive interval; its cross-validated RMSE "
                               f"is {fit['rmse']:.4g}")
        return out
    from . import gp

    model = gp.from_json(fit["kernel"])
    mean, std = model.predict(gp.scale(fit["kernel"], x), return_std=True)
    half = float(stats.norm.ppf(0.5 + level / 2)) * float(std[0])
    out |= {"prediction": float(mean[0]), "std": float(std[0]),
            "prediction_interval": [float(mean[0]) - half, float(mean[0]) + half]}
    return out
