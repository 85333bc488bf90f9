"""A study file loaded and validated: YAML with positions (source), the pydantic models (spec),
errors at their lines (validation), a study's files at a git revision (revision)."""
