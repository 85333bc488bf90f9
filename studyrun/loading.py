"""Pipeline step *load*: a study file to a validated spec, every mistake located in its file.

`load_study` reads, validates and cross-checks a study file into a `Loaded` study.

`study_context` builds what the analysis may know of the study beyond its own block.

`read_yaml` (in `source`) keeps FILE:LINE:COL for every key and value; `include_files` splices
`model: {file: ...}` in with the included file's own positions; `validate` runs a pydantic model
and reports all its errors at once, each at its line (mapping in `validation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from pydantic import BaseModel, ValidationError

from .analyses.base import StudyContext
from .core.errors import StudyError, named_only
from .dependencies import dependency_digests
from .params import varied
from .params.correlation import correlation_matrix
from .source import VALUE, Source, describe, format_path, format_problems, read_yaml
from .spec import Study
from .spec.checks import check_study
from .validation import problems_from

YAML_SUFFIXES = (".yaml", ".yml")
__all__ = ["VALUE", "Loaded", "Source", "format_path", "format_problems", "include_files",
           "load_study", "read_yaml", "study_context", "validate"]


def include_files(source: Source, key: str = "model") -> Source:
    """Splice `key: {file: relative/path.yaml}` in from that file, keeping its own positions."""
    if not isinstance(source.data, dict):
        return source
    value = source.data.get(key)
    if not (isinstance(value, dict) and list(value) == ["file"]):
        return source
    target = value["file"]
    where = (key, "file", VALUE)
    if not isinstance(target, str) or not target.strip():
        raise StudyError([source.problem(where, f"expected the path of a YAML file, got {describe(target)}")])
    folder = Path(source.file).parent
    path = folder / target
    try:
        found = path.is_file()
        what = "" if found else "is a folder, not a file" if path.is_dir() else "file not found"
    except OSError as exc:  # a name too long, a folder that cannot be searched
        found, what = False, f"cannot use the path ({exc.strerror or exc})"
    if not found:
        raise StudyError([source.problem(where, f"{what}: {target} (relative to {folder}/)")])
    if path.suffix.lower() not in YAML_SUFFIXES:  # never quote a line of /etc/passwd in an error
        raise StudyError([source.problem(where, f"{target} is not a YAML file: a model file's "
                                         "name ends in .yaml or .yml")])
    included = read_yaml(path)
    positions = {p: pos for p, pos in source.positions.items() if not (len(p) > 1 and p[0] == key)}
    for p, pos in included.positions.items():
        positions[(key,) + p if p else (key, VALUE)] = pos
    data = dict(source.data)
    data[key] = included.data
    return Source(data, positions, file=source.file, includes={**source.includes, key: str(path)})


def validate(model_cls: type[BaseModel], source: Source, context: dict | None = None) -> BaseModel:
    """Validate `source.data` with pydantic; raise one StudyError holding every mistake, located."""
    try:
        return model_cls.model_validate(source.data, context=context)
    except ValidationError as exc:
        problems = problems_from(exc.errors(include_url=False), model_cls, source)
    raise StudyError(problems)


def study_context(study: Study, folder: Path) -> StudyContext:
    """What the study's analysis may know of it beyond its own block: the model as the analysis
    runs it, the parameters, the fixed inputs' values, the model's defaults and the folder."""
    model, notes = study.analysis.model_for(study.model_spec)
    defaults = model.defaults()
    vary = varied(study.parameters)
    fixed = {name: p.nominal_value(defaults.get(name)) for name, p in study.parameters.items()
             if name not in vary}
    return StudyContext(model=model, parameters=dict(study.parameters), varied=vary, fixed=fixed,
                        defaults=defaults, folder=folder, quantities=study.quantities,
                        notes=tuple(notes),
                        correlation=correlation_matrix(study.correlation, list(vary)))


@dataclass
class Loaded:
    """A validated study, where it came from, and its context (built once, when first asked)."""

    study: Study
    path: Path
    source: Source
    digests: dict[str, str] | None = field(default=None, repr=False)

    @property
    def folder(self) -> Path:
        return self.path.resolve().parent

    @cached_property
    def context(self) -> StudyContext:
        return study_context(self.study, self.folder)

    def dependencies(self) -> dict[str, str]:
        """name -> SHA-256 of every file the runs depend on, hashed once per load."""
        if self.digests is None:
            self.digests = dependency_digests(self.study, self.folder)
        return self.digests


def load_study(path: str | Path, *, check: bool = True) -> Loaded:
    """Read, validate and cross-check a study file; every problem is in one StudyError, those
    in files outside the study's folder named, never quoted."""
    path = Path(path)
    folder = path.resolve().parent
    try:
        source = include_files(read_yaml(path))
        loaded = Loaded(validate(Study, source), path, source)
        problems = [source.problem(where, message)
                    for where, message in check_study(loaded.study, loaded.context)] if check else []
    except StudyError as error:
        raise StudyError(named_only(error.problems, folder)) from None
    if problems:
        problems = named_only(problems, folder)
        raise StudyError(sorted(problems, key=lambda p: (p.file or "", p.line or 0, p.col or 0)))
    return loaded
