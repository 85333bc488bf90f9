"""The JSON Schemas studyrun publishes, generated from the pydantic models: a study file's
(schemas/study.schema.json) and a results folder's analysis.json (schemas/analysis.schema.json)."""

from __future__ import annotations

from typing import Any

SCHEMA_ID = "https://studyrun.dev/schemas/study.schema.json"
ANALYSIS_SCHEMA_ID = "https://studyrun.dev/schemas/analysis.schema.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"


def study_schema() -> dict[str, Any]:
    from studyrun.study.spec import Study

    schema = Study.model_json_schema()
    return {"$schema": DRAFT, "$id": SCHEMA_ID, "title": "studyrun study", **schema}


def analysis_schema() -> dict[str, Any]:
    """analysis.json's schema: the envelope, and `results` by the analysis type in `analysis`
    (each type's `results_model`)."""
    from studyrun.results.analysis_file import AnalysisFile
    from studyrun.results.records import RESULTS_MODELS
    from studyrun.study.spec import AnalysisUnion  # noqa: F401  (defines, and so registers, every type)

    schema = AnalysisFile.model_json_schema()
    definitions = schema.setdefault("$defs", {})
    kinds = sorted(RESULTS_MODELS)
    schema["properties"]["analysis"]["enum"] = kinds
    cases = []
    for kind in kinds:
        results = RESULTS_MODELS[kind].model_json_schema(ref_template="#/$defs/{model}")
        for name, definition in results.pop("$defs", {}).items():
            if definitions.setdefault(name, definition) != definition:
                raise ValueError(f"two records of analysis.json are called {name}: rename one")
        name = RESULTS_MODELS[kind].__name__
        definitions[name] = results
        cases.append({"if": {"properties": {"analysis": {"const": kind}}},
                      "then": {"properties": {"results": {"$ref": f"#/$defs/{name}"}}}})
    schema["properties"]["results"] = {"type": "object", "description": "the analysis's own "
                                       "numbers; their keys by analysis type (below)"}
    schema["allOf"] = cases
    return {"$schema": DRAFT, "$id": ANALYSIS_SCHEMA_ID, "title": "studyrun analysis.json",
            **schema}
