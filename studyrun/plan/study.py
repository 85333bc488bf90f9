"""A study's plan: the design of its analysis made into runs with identities, and what every
run's identity shares (the model as the analysis runs it, the quantities, the files)."""

from __future__ import annotations

import numpy as np

from ..dependencies import code_digest, identity_parts
from ..loading import Loaded
from . import Plan, make_plan


def plan_study(loaded: Loaded) -> Plan:
    """The runs the study's analysis asks for, with their identities."""
    context = loaded.context
    design = loaded.study.analysis.design(context, np.random.SeedSequence(loaded.study.seed))
    return make_plan(design, context.fixed, identity_context(loaded), content=given_content(loaded))


def given_content(loaded: Loaded) -> np.ndarray | None:
    """Per given run (`analysis.from:`), what it gave; None when the model makes the runs."""
    rows = loaded.study.analysis.given(loaded.context)
    return None if rows is None else rows.content()[1]


def identity_context(loaded: Loaded) -> dict:
    """What every run's identity shares besides the fixed inputs: the model as the analysis runs
    it, the quantities and the digest of the files the runs depend on; for given runs, their
    output columns and the quantities (the model plays no part in them)."""
    rows = loaded.study.analysis.given(loaded.context)
    if rows is not None:
        return {"given": rows.content()[0], "quantities": loaded.study.quantities}
    return {"model": loaded.context.model.model_dump(mode="json"),
            "quantities": loaded.study.quantities, "code": code_digest(loaded.dependencies())}


def identity_record(loaded: Loaded) -> dict:
    """What the store remembers of this study's run context, for `studyrun plan` to compare."""
    context = loaded.context
    return identity_parts(context.model, context.quantities, context.fixed, loaded.dependencies())
