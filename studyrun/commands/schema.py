"""The JSON Schema of a study file, generated from the pydantic models (schemas/study.schema.json)."""

from __future__ import annotations

SCHEMA_ID = "https://studyrun.dev/schemas/study.schema.json"


def study_schema() -> dict:
    from studyrun.study.spec import Study

    schema = Study.model_json_schema()
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": SCHEMA_ID,
            "title": "studyrun study", **schema}
