"""A study's plan: its varied parameters, fixed inputs and run context, and the design of its
analysis made into runs with identities."""

from __future__ import annotations

import numpy as np

from ..dependencies import code_digest, identity_parts
from ..loading import Loaded
from ..params import varied
from . import Plan, make_plan


def plan_study(loaded: Loaded) -> Plan:
    """The runs the study's analysis asks for, with their identities."""
    parameters, fixed, context = plan_parts(loaded)
    design = loaded.study.analysis.design(parameters, np.random.SeedSequence(loaded.study.seed))
    return make_plan(design, fixed, context)


def plan_parts(loaded: Loaded) -> tuple[dict, dict[str, float], dict]:
    """What every plan of a study shares: varied parameters, fixed inputs, the run context."""
    study = loaded.study
    parameters = varied(study.parameters)
    defaults = study.model.defaults()
    fixed = {name: p.nominal_value(defaults.get(name)) for name, p in study.parameters.items()
             if name not in parameters}
    context = {"model": study.model.model_dump(mode="json"), "quantities": study.quantities,
               "code": code_digest(loaded.dependencies())}
    return parameters, fixed, context


def identity_record(loaded: Loaded) -> dict:
    """What the store remembers of this study's run context, for `studyrun plan` to compare."""
    _, fixed, _ = plan_parts(loaded)
    return identity_parts(loaded.study, fixed, loaded.dependencies())
