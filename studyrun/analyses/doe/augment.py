"""Designs that grow (plan step): an earlier doe study's runs, read exactly from its results
folder, followed by new ones: the fold-over of a two-level fraction, the axial and centre points
that make a two-level factorial a central composite design, or more Latin hypercube points in the
strata the earlier ones left empty. The earlier runs keep their identities, so they are reused.

Formulas, defaults and edge cases: docs/methods.md, "Designs that grow".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from studyrun.analyses.base import StudyContext
from studyrun.analyses.doe.designs import describe_factors
from studyrun.analyses.doe.fractions import describe_fraction
from studyrun.analyses.doe.terms import read_coding, to_coded, to_natural
from studyrun.core.design import Design
from studyrun.core.errors import Problem, StudyError, StudyrunError
from studyrun.results.outputs import Finished, read_finished
from studyrun.store.finished_runs import FinishedRuns, read_finished_runs

WHERE = "from"
CANDIDATES = 200  # random fillings of the empty strata an lhs augmentation chooses among
_TOL = 1e-9


@dataclass(frozen=True)
class Earlier:
    """The finished doe study a design grows from: its analysis.json and its runs."""

    finished: Finished
    runs: FinishedRuns

    @property
    def kind(self) -> str:
        return str(self.design.get("type", ""))

    @property
    def design(self) -> dict[str, Any]:
        """analysis.json's `design` block (validated as an object or null)."""
        return self.finished.analysis.get("design") or {}


def earlier_folder(name: str, context: StudyContext) -> Path:
    return context.path(name).resolve()


def read_earlier(name: str, context: StudyContext) -> Earlier:
    """The folder `from:` names: finished results of a doe study, its runs read exactly."""
    folder = earlier_folder(name, context)
    try:
        finished = read_finished(folder)
        if finished.analysis.get("analysis") != "doe":
            raise StudyError(f"{folder} holds results of a {finished.analysis.get('analysis')} "
                             "study; augment grows the design of an earlier doe study",
                             path=WHERE)
        return Earlier(finished, read_finished_runs(folder))
    except StudyError:
        raise
    except (StudyrunError, OSError) as error:
        raise StudyError(str(getattr(error, "strerror", None) or error), path=WHERE) from None


def earlier_problems(spec: Any, context: StudyContext) -> list[Problem]:
    """The earlier folder holds a finished doe study of the same varied parameters and bounds,
    whose design the augmentation applies to."""
    try:
        earlier = read_earlier(spec.from_, context)
    except StudyError as error:
        if any(problem.file for problem in error.problems):
            raise  # located in the earlier folder's runs.csv, as given_problems does
        return error.problems
    folder, names = earlier.finished.folder, list(context.varied)
    if earlier.runs.names != names:
        return [Problem(f"{folder} varies {earlier.runs.names}; this study varies {names}: a "
                        "grown design varies the same parameters, in the same order", WHERE)]
    problems = []
    factors = earlier.design.get("factors")
    factors = factors if isinstance(factors, dict) else {}
    for name, now in describe_factors(names, *read_coding(names, context.varied)).items():
        before = factors.get(name) if isinstance(factors.get(name), dict) else {}
        if (before.get("low"), before.get("high")) != (now["low"], now["high"]):
            problems.append(Problem(
                f"parameters.{name} has bounds [{now['low']:.6g}, {now['high']:.6g}], but the "
                f"earlier study's were [{before.get('low')}, {before.get('high')}]; a grown design "
                "keeps the earlier bounds (its coded units are theirs)", WHERE))
    if problems:
        return problems
    try:
        new_runs(spec, earlier, context, np.random.SeedSequence(0))
    except StudyError as error:
        problems += error.problems
    return problems


def grow(spec: Any, context: StudyContext, seed: np.random.SeedSequence) -> Design:
    """The earlier runs (bit for bit, in their plan order) followed by the new ones."""
    earlier = read_earlier(spec.from_, context)
    names = list(context.varied)
    centers, halves = read_coding(names, context.varied)
    coded, info = new_runs(spec, earlier, context, seed)
    matrix = np.vstack([earlier.runs.inputs, to_natural(coded, centers, halves)])
    info = {"type": info.pop("type"), "runs": len(matrix), "augment": spec.augment,
            "from": str(earlier.finished.folder), "grown_from": earlier.kind,
            "earlier_runs": len(earlier.runs.ids), "new_runs": len(coded)} | info
    info["factors"] = describe_factors(names, centers, halves)
    return Design(names=names, matrix=matrix, info=info)


def new_runs(spec: Any, earlier: Earlier, context: StudyContext,
             seed: np.random.SeedSequence) -> tuple[np.ndarray, dict]:
    """The coded runs the augmentation adds, and the facts worth keeping about the grown design."""
    names = list(context.varied)
    coded = to_coded(earlier.runs.inputs, *read_coding(names, context.varied))
    if spec.augment == "foldover":
        return fold_over(coded, earlier.kind)
    if spec.augment == "ccd":
        return add_axial_and_centre(coded, 1 if spec.center is None else spec.center)
    if earlier.kind != "lhs":
        raise StudyError(f"augment: lhs grows a Latin hypercube (design: lhs); the earlier "
                         f"design is {earlier.kind}", path="augment")
    samples = spec.samples or len(coded)
    unit = augment_lhs((coded + 1.0) / 2.0, samples, np.random.default_rng(seed))
    return 2.0 * unit - 1.0, {"type": "lhs", "criterion": "maximin",
                              "strata": latin_strata(np.vstack([(coded + 1) / 2, unit]))}


def two_level(coded: np.ndarray, augment: str, needs: str) -> np.ndarray:
    """The earlier coded design snapped to ±1, or a located error when it is not two-level."""
    snapped = np.sign(coded)
    if not len(coded) or np.max(np.abs(np.abs(coded) - 1.0)) > _TOL:
        raise StudyError(f"augment: {augment} needs {needs}; the earlier design has levels "
                         "other than the bounds (±1 coded)", path="augment")
    return snapped


def fold_over(coded: np.ndarray, kind: str) -> tuple[np.ndarray, dict]:
    """Every sign reversed: a resolution III fraction and its fold-over make one of resolution IV."""
    cube = two_level(coded, "foldover", "a two-level fraction (design: fractional or "
                                        "plackett_burman)")
    folded = -cube
    if set(map(tuple, folded)) <= set(map(tuple, cube)):
        raise StudyError("the fold-over of the earlier design repeats its runs (a full factorial, "
                         "or a fraction whose defining words all have even length): it would "
                         "de-alias nothing; use augment: ccd to add curvature instead",
                         path="augment")
    return folded, {"type": kind} | describe_fraction(np.vstack([cube, folded]))


def add_axial_and_centre(coded: np.ndarray, center: int) -> tuple[np.ndarray, dict]:
    """2k face-centred axial points and `center` centre points after a two-level factorial."""
    import pydoe

    needs = "a two-level factorial (full, or a fraction of resolution V or more)"
    cube = two_level(coded, "ccd", needs)
    k = cube.shape[1]
    fraction = describe_fraction(cube)
    distinct = len(np.unique(cube, axis=0))
    words = 2 ** k // distinct if distinct and (2 ** k) % distinct == 0 else 0
    if not (words == 1 or (words > 1 and (fraction["resolution"] or 0) >= 5)):
        raise StudyError(f"augment: ccd needs {needs}, so that every quadratic term is estimable;"
                         f" the earlier design has {distinct} distinct runs of {k} factors at "
                         f"resolution {fraction['resolution'] or 'unknown'}; start from design: full (or "
                         "design: fractional with resolution: 5)", path="augment")
    axial, _ = pydoe.star(k, alpha="faced")
    return np.vstack([axial, np.zeros((center, k))]), {
        "type": "ccd", "alpha": "face", "alpha_value": 1.0, "center": center}


def augment_lhs(unit: np.ndarray, samples: int, rng: np.random.Generator) -> np.ndarray:
    """`samples` new points in [0, 1)^k: the range cut into n = earlier + samples strata per
    column, each new point in a stratum no earlier point occupies (R lhs's augmentLHS), the
    filling chosen among CANDIDATES random ones by the largest smallest distance to any other
    point of the grown design (maximin)."""
    from scipy.spatial.distance import cdist, pdist

    n = len(unit) + samples
    occupied = np.minimum(np.floor(unit * n).astype(int), n - 1)
    empty = [np.setdiff1d(np.arange(n), occupied[:, j]) for j in range(unit.shape[1])]
    best, best_score = None, -np.inf
    for _ in range(CANDIDATES):
        strata = np.column_stack([rng.choice(cells, samples, replace=False) for cells in empty])
        points = (strata + rng.random(strata.shape)) / n
        score = min(cdist(points, unit).min(initial=np.inf),
                    pdist(points).min(initial=np.inf))
        if score > best_score:
            best, best_score = points, score
    return best


def latin_strata(unit: np.ndarray) -> str:
    """Whether a design is a Latin hypercube on its own count: one point per stratum per column."""
    n = len(unit)
    occupied = np.minimum(np.floor(unit * n).astype(int), n - 1)
    full = all(len(np.unique(occupied[:, j])) == n for j in range(unit.shape[1]))
    return (f"one point in each of the {n} strata of every column" if full else
            f"some of the {n} strata of a column hold two points (earlier points that shared one)")
