"""Parameters of a study (pipeline step: load -> plan): kinds, validation and the unit cube.

Every kind maps points of the unit cube to natural values through its inverse CDF (`ppf`), so
every design (random, LHS, Sobol', Saltelli, Morris...) is drawn once in (0, 1)^d and mapped the
same way. The registry is the union `ParameterSpec`: a bare number (`Fixed`), a mapping with
`distribution:` (one class per name), or a mapping with `bounds: [lo, hi]` alone (`Bounds`).

`bounds()` is the finite box used by DOE designs, fits and sweeps: the kind's own limits where it
has them (uniform, bounds, truncnormal, triangular, loguniform, beta, discrete), and the 0.1% and
99.9% quantiles where it has none (normal, lognormal, gamma, and a one-sided truncnormal's open
side).
"""

from studyrun.blocks.params.base import (
           DISTRIBUTIONS,
           TAGS,
           TAIL,
           ParameterBase,
           Positive,
           Real,
           Whole,
           stats,
)
from studyrun.blocks.params.continuous import (
           Beta,
           Gamma,
           LogNormal,
           LogUniform,
           Normal,
           Triangular,
           TruncNormal,
           Uniform,
)
from studyrun.blocks.params.correlation import correlate_unit, design_facts
from studyrun.blocks.params.mapping import map_unit, varied
from studyrun.blocks.params.sampling import sample_unit, sample_unit_chunks, sample_unit_range
from studyrun.blocks.params.union import ParameterSpec
from studyrun.blocks.params.values import Bounds, Discrete, Fixed

__all__ = ["DISTRIBUTIONS", "TAGS", "TAIL", "Beta", "Bounds", "Discrete", "Fixed", "Gamma",
           "LogNormal", "LogUniform", "Normal", "ParameterBase", "ParameterSpec", "Positive",
           "Real", "Triangular", "TruncNormal", "Uniform", "Whole", "correlate_unit",
           "design_facts", "map_unit", "sample_unit", "sample_unit_chunks", "sample_unit_range",
           "stats", "varied"]
