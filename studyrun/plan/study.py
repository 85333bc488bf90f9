"""A study's plan: the design of its analysis made into runs with identities, and what every
run's identity shares (the model as the analysis runs it, the quantities, the files)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from studyrun.blocks.dependencies import code_digest, identity_parts
from studyrun.blocks.quantities import meaning
from studyrun.core.design import Design
from studyrun.plan import Plan, make_plan
from studyrun.study.loading import Loaded

if TYPE_CHECKING:
    from studyrun.analyses.given import GivenRows


def plan_study(loaded: Loaded) -> Plan:
    """The runs the study's analysis asks for, with their identities."""
    context = loaded.context
    design = loaded.study.analysis.design(context, np.random.SeedSequence(loaded.study.seed))
    rows = loaded.study.analysis.given(context)
    if rows is not None:
        return given_plan(loaded, rows, design)
    return make_plan(design, context.fixed, identity_context(loaded))


def given_plan(loaded: Loaded, rows: "GivenRows", design: Design | None = None) -> Plan:
    """The plan of runs that exist (`analysis.from:`): each identity derived from the row's whole
    content, its output columns and the quantities; the model plays no part in them."""
    names, content = rows.content()
    context = {"given": names, **quantities_context(loaded.study.quantities)}
    return make_plan(design or rows.design({}), loaded.context.fixed, context, content=content)


def identity_context(loaded: Loaded) -> dict:
    """What every run's identity shares besides the fixed inputs: the model as the analysis runs
    it, the quantities, the digest of the files the runs depend on and, for a model that draws
    random numbers, the seed."""
    return {"model": loaded.context.model.model_dump(mode="json"),
            **quantities_context(loaded.study.quantities), "code": code_digest(loaded.dependencies()),
            **seed_part(loaded)}


def quantities_context(quantities: dict[str, str] | None) -> dict:
    """The quantities' part of an identity: their text, and the version of what the reductions
    they call compute when it changed since runs were first stored (quantities.MEANING)."""
    version = meaning(quantities)
    return {"quantities": quantities, **({"meaning": version} if version else {})}


def identity_record(loaded: Loaded) -> dict:
    """What the store remembers of this study's run context, for `studyrun plan` to compare."""
    context = loaded.context
    record = identity_parts(context.model, context.quantities, context.fixed, loaded.dependencies())
    version = meaning(context.quantities)
    return {**record, **({"meaning": version} if version else {}), **seed_part(loaded)}


def seed_part(loaded: Loaded) -> dict:
    """The study's seed when the model draws random numbers from it (each run's are derived from
    its identity, core/seeds.py); nothing for other models, whose runs any seed reuses."""
    context = loaded.context
    uses = context.model.uses_seed(context.folder, loaded.run_code)
    return {"seed": loaded.study.seed} if uses else {}
