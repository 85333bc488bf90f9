"""Coded designs for the doe analysis (plan step), built with pydoe and mapped to natural units.

Factorials, fractions (user generators, a requested resolution, or minimum aberration),
Plackett–Burman, central composite, Box–Behnken and maximin Latin hypercubes follow pydoe
(the pyDOE/pyDOE2/pyDOE3 line, after Montgomery's Design and Analysis of Experiments). Coded
units are x = (p - center) / half_range over each parameter's bounds, so ±1 are the bounds.

Formulas, defaults and edge cases: docs/methods.md,
"Designed experiments and fractional factorials".
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from studyrun.analyses.doe.fractions import LETTERS, describe_fraction
from studyrun.analyses.doe.terms import read_coding, to_coded, to_natural
from studyrun.core.design import Design
from studyrun.core.errors import StudyError

_OPT_SEARCH_LIMIT = 5000  # generator combinations fracfact_opt may try for minimum aberration


def build_design(spec: Any, parameters: dict[str, Any], seed: np.random.SeedSequence,
                 given: np.ndarray | None = None) -> Design:
    """The runs of a doe analysis in natural units (`given`: the rows of runs that exist), with
    small JSON facts about the design."""
    names = list(parameters)
    centers, halves = read_coding(names, parameters)
    if given is not None:
        natural = given
        coded, info = to_coded(natural, centers, halves), {}
    elif spec.kind == "csv":
        natural = read_csv_design(spec.file, names)
        coded, info = to_coded(natural, centers, halves), {}
    else:
        coded, info = build_coded(spec, names, seed)
        natural = to_natural(coded, centers, halves)
    info = {"type": spec.kind, "runs": int(coded.shape[0])} | info
    info["factors"] = describe_factors(names, centers, halves)
    return Design(names=names, matrix=natural, info=info)


def describe_factors(names: list[str], centers: np.ndarray, halves: np.ndarray) -> dict:
    """Each factor's symbol and the natural values coded -1 and +1 (the design's `factors`)."""
    return {name: {"symbol": f"x{i + 1}", "low": float(c - h), "high": float(c + h)}
            for i, (name, c, h) in enumerate(zip(names, centers, halves))}


def coded_matrix(design: Design) -> np.ndarray:
    """The coded design, recomputed from the natural one and the factors' bounds in info."""
    factors = design.info["factors"]
    lows = np.array([factors[n]["low"] for n in design.names])
    highs = np.array([factors[n]["high"] for n in design.names])
    return to_coded(design.matrix, (lows + highs) / 2, (highs - lows) / 2)


def build_coded(spec: Any, names: list[str], seed: np.random.SeedSequence) -> tuple[np.ndarray, dict]:
    """The coded matrix for one design type and the facts worth keeping about it."""
    import pydoe

    k = len(names)
    kind = spec.kind
    if kind == "full":
        return build_full(spec.levels, names)
    if kind == "fractional":
        require_factors(k, 2, kind)
        return build_fraction(spec, k)
    if kind == "plackett_burman":
        require_factors(k, 2, kind)
        return plackett_burman(k), {}
    if kind == "ccd":
        return build_ccd(spec, k)
    if kind == "bbd":
        require_factors(k, 3, kind, hint="use design: ccd, or design: full with levels: 3")
        center = 1 if spec.center is None else spec.center
        return pydoe.bbdesign(k, center=center), {"center": center}
    if kind == "lhs":
        samples = spec.samples or 10 * k
        rng = np.random.default_rng(seed)
        unit = pydoe.lhs(k, samples=samples, criterion="maximin", iterations=20, seed=rng)
        return 2.0 * unit - 1.0, {"criterion": "maximin"}
    raise StudyError(f"unknown design {kind!r}", path="analysis.design")


def plackett_burman(k: int) -> np.ndarray:
    """A Plackett-Burman design of k factors: the fewest runs above k, a multiple of 4, of which
    pydoe builds a Hadamard matrix (2^a, 12 * 2^a or 20 * 2^a runs; 48 runs for 40 factors,
    where 44 has no such matrix and pydoe fails)."""
    import pydoe

    runs = 4 * (k // 4 + 1)
    while not any(runs % m == 0 and (runs // m) & (runs // m - 1) == 0 for m in (1, 12, 20)):
        runs += 4
    return pydoe.pbdesign(runs - 1)[:, :k].astype(float)  # pydoe's matrix for `runs`, k columns


def require_factors(k: int, least: int, kind: str, hint: str = "") -> None:
    """A user error when a design needs more varied parameters than the study has."""
    if k < least:
        raise StudyError(f"design {kind} needs at least {least} varied parameters; got {k}"
                         + (f" ({hint})" if hint else ""), path="analysis.design")


def build_full(levels: int | dict[str, int], names: list[str]) -> tuple[np.ndarray, dict]:
    """Full factorial: each factor at `levels` equally spaced coded values from -1 to 1."""
    import pydoe

    if isinstance(levels, dict):
        unknown = sorted(set(levels) - set(names))
        if unknown:
            raise StudyError(f"levels given for parameters that are not varied: {unknown}; "
                             f"varied: {names}", path="analysis.levels")
        counts = [int(levels.get(n, 2)) for n in names]
    else:
        counts = [int(levels)] * len(names)
    if all(c == 2 for c in counts):
        coded = pydoe.ff2n(len(names))
    else:
        index = pydoe.fullfact(counts)
        coded = np.column_stack([np.linspace(-1, 1, c)[index[:, j].astype(int)]
                                 for j, c in enumerate(counts)])
    return coded, {"levels": dict(zip(names, counts))}


def build_fraction(spec: Any, k: int) -> tuple[np.ndarray, dict]:
    """A 2^(k-p) fraction from user generators, a resolution, or minimum aberration."""
    import pydoe

    if spec.generators:
        words = spec.generators.split()
        if len(words) != k:
            raise StudyError(f"generators must name {k} columns, one per varied parameter "
                             f"(letters a, b, ... in parameter order); got {len(words)}",
                             path="analysis.generators")
        try:
            coded = pydoe.fracfact(" ".join(words))
        except ValueError as exc:
            raise StudyError(f"invalid generators {spec.generators!r}: {exc} "
                             "(example for 5 factors: 'a b c ab ac')",
                             path="analysis.generators") from exc
        source = "generators"
    else:
        resolution = spec.resolution or default_resolution(spec.response)
        coded, source = build_by_resolution(k, resolution)
    info = {"method": source} | describe_fraction(coded)
    if spec.resolution and (info["resolution"] or 99) < spec.resolution:
        raise StudyError(f"the generators give resolution {info['resolution']}, below the "
                         f"requested {spec.resolution}", path="analysis.generators")
    return coded, info


def default_resolution(response: str | None) -> int:
    """IV keeps main effects clear of two-factor interactions; V keeps those clear of each other."""
    return 4 if response in (None, "linear") else 5


def build_by_resolution(k: int, resolution: int) -> tuple[np.ndarray, str]:
    """The smallest fraction of this resolution, minimum aberration when the search is small."""
    import pydoe

    try:
        smallest = pydoe.fracfact_by_res(k, resolution)
    except ValueError as exc:
        raise StudyError(f"no two-level fraction of {k} factors at resolution {resolution}: "
                         f"{exc}", path="analysis.resolution") from exc
    m = int(round(math.log2(smallest.shape[0])))
    p = k - m
    candidates = 2 ** m - m - 1
    if p <= 0 or k > 20 or math.comb(candidates, p) > _OPT_SEARCH_LIMIT:
        return smallest, "fracfact_by_res"
    generators, _, _ = pydoe.fracfact_opt(k, p)
    coded = pydoe.fracfact(generators)
    found = describe_fraction(coded)["resolution"]
    if found is None or found < resolution:
        return smallest, "fracfact_by_res"
    return coded, "minimum aberration (fracfact_opt)"


def build_ccd(spec: Any, k: int) -> tuple[np.ndarray, dict]:
    """Central composite: face-centred, or rotatable/orthogonal scaled to stay inside the bounds.

    Rotatable and orthogonal designs are inscribed (pydoe 'cci'): the axial points sit on the
    bounds and the factorial points at ±1/alpha, so no run leaves the parameters' box. From five
    factors the factorial part is the smallest resolution V fraction (Myers & Montgomery), which
    still estimates every quadratic term, instead of the full 2^k.
    """
    import pydoe

    require_factors(k, 2, "ccd", hint="use design: full with levels: 3 for one parameter")
    alpha = spec.alpha or "face"
    center = 1 if spec.center is None else spec.center
    blocks = (center - center // 2, center // 2)
    cube = pydoe.ff2n(k) if k < 5 else pydoe.fracfact_by_res(k, 5)
    if len(cube) == 2 ** k:
        face = "ccf" if alpha == "face" else "cci"
        coded = pydoe.ccdesign(k, center=blocks, alpha="o" if alpha == "face" else alpha, face=face)
        value = 1.0 if alpha == "face" else float(1.0 / np.max(np.abs(coded[: 2 ** k])))
        info = {}
    else:
        value = axial_distance(alpha, k, len(cube), blocks)
        axial, _ = pydoe.star(k)
        coded = pydoe.union(pydoe.union(cube, pydoe.repeat_center(k, blocks[0])),
                            pydoe.union(axial * value, pydoe.repeat_center(k, blocks[1])))
        coded = coded / value
        info = {"factorial": f"2^({k}-{k - int(round(math.log2(len(cube))))}) resolution V"}
    return coded, {"alpha": alpha, "alpha_value": value, "center": center} | info


def axial_distance(alpha: str, k: int, cube_runs: int, blocks: tuple[int, int]) -> float:
    """Axial distance in factorial units: 1 (face), F^(1/4) (rotatable), or pydoe's orthogonal one."""
    if alpha == "face":
        return 1.0
    if alpha == "rotatable":
        return float(cube_runs ** 0.25)
    return float(np.sqrt(k * (1 + blocks[1] / (2 * k)) / (1 + blocks[0] / cube_runs)))


def read_csv_design(file: str | None, names: list[str]) -> np.ndarray:
    """A user's design from CSV: one column per varied parameter (natural units), one row per
    run; every mistake located in the file."""
    from studyrun.core.csv_table import read_table

    table = read_table(file or "")
    missing = [n for n in names if n not in table.header]
    if missing:
        raise table.fail(table.header_line, 1, f"the design file lacks columns for {missing}; "
                         f"it has {table.header}")
    if not table.rows:
        raise table.fail(table.header_line, 1, "no runs under the header: a design needs a row "
                         "per run")
    values = np.full((len(table.rows), len(names)), np.nan)
    for i, (line, row) in enumerate(table.rows):
        for j, name in enumerate(names):
            index = table.header.index(name)
            text, col = row[index] if index < len(row) else ("", 1)
            try:
                values[i, j] = float(text)
            except ValueError:
                pass
            if not np.isfinite(values[i, j]):
                raise table.fail(line, col, f"{name} is {text.strip()!r}; every run of a design "
                                 "file needs a finite number for each parameter")
    return values


def describe_design(design: Design, limit: int = 40) -> str:
    """The design for `studyrun plan`: coded and natural units, and a fraction's aliases."""
    from studyrun.results.report.markdown import Markdown, table

    info = design.info
    coded = coded_matrix(design)
    lines = [f"doe design: {info.get('type')}, {info.get('runs')} runs, "
             f"{len(design.names)} factors"]
    for i, name in enumerate(design.names):
        f = info["factors"][name]
        lines.append(f"  x{i + 1} ({LETTERS[i] if i < 26 else '-'}) = {name}: "
                     f"coded -1..1 = [{f['low']:.6g}, {f['high']:.6g}]")
    if "augment" in info:
        lines.append(f"  grown by {info['augment']} from {info['from']}: its "
                     f"{info['earlier_runs']} runs (reused where the model is unchanged), then "
                     f"{info['new_runs']} new runs")
    for key in ("alpha", "alpha_value", "center", "method", "levels", "criterion", "strata"):
        if key in info:
            lines.append(f"  {key}: {info[key]}")
    if "resolution" in info:
        lines.append(f"  resolution: {info['resolution'] or 'full (no aliasing)'}")
        lines += [f"  generators: {', '.join(info.get('generators', [])) or 'none'}",
                  f"  defining relation: {info.get('defining_relation')}", "  aliases:"]
        lines += [f"    {chain}" for chain in info.get("aliases", [])]
    headers = ["run"] + [f"x{i + 1}" for i in range(len(design.names))] + list(design.names)
    rows = [[r] + list(coded[r]) + list(design.matrix[r]) for r in range(min(limit, len(coded)))]
    lines += ["", table([Markdown(h) for h in headers], rows)]  # for a terminal: as they are
    if len(coded) > limit:
        lines.append(f"... {len(coded) - limit} more runs")
    return "\n".join(lines)
