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

from studyrun.analyses.base import StudyContext
from studyrun.blocks.dependencies import dependency_digests
from studyrun.blocks.params import varied
from studyrun.blocks.params.correlation import correlation_matrix
from studyrun.core.errors import StudyError, named_only
from studyrun.study.source import VALUE, Source, describe, format_path, format_problems, read_yaml
from studyrun.study.spec import Study
from studyrun.study.spec.checks import check_study
from studyrun.study.validation import error_paths, problems_from

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
    model = model.with_whole_numbers(study.analysis.whole_numbers(study.parameters))
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
    run_code: bool = True  # False: loaded and planned without running any of the study's code

    @property
    def folder(self) -> Path:
        return self.path.resolve().parent

    @cached_property
    def context(self) -> StudyContext:
        return study_context(self.study, self.folder)

    def dependencies(self) -> dict[str, str]:
        """name -> SHA-256 of every file the runs depend on, hashed once per load."""
        if self.digests is None:
            self.digests = dependency_digests(self.study, self.folder, self.run_code)
        return self.digests


def load_study(path: str | Path, *, check: bool = True, run_code: bool = True) -> Loaded:
    """Read, validate and cross-check a study file; every problem is in one StudyError (those in
    files outside the study's folder named, never quoted), the cross-section checks run on the
    parts that validated when others did not. Without `run_code` nothing of the study runs: a
    model whose check would run it (a python model's import) is not checked, and a python
    model's files are found from its import statements."""
    path = Path(path)
    folder = path.resolve().parent
    try:
        loaded = validated(path, check, run_code)
    except StudyError as error:
        raise StudyError(in_order(named_only(error.problems, folder))) from None
    return loaded


def validated(path: Path, check: bool, run_code: bool) -> Loaded:
    """load_study's work, its problems quoted wherever they are."""
    source = include_files(read_yaml(path))
    context = {"study_dir": path.resolve().parent, "translate": check and run_code}
    try:
        study = Study.model_validate(source.data, context=context)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        problems = problems_from(errors, Study, source)
        if check:
            problems += checks_of_parts(source, path, error_paths(errors, Study, source.data),
                                        context)
        raise StudyError(in_order(problems)) from None
    loaded = Loaded(study, path, source, run_code=run_code)
    if check:
        problems = [source.problem(where, message)
                    for where, message in check_study(loaded.study, loaded.context, run_code)]
        if problems:
            raise StudyError(in_order(problems))
    return loaded


def in_order(problems: list) -> list:
    """Problems by file and position, each once."""
    return sorted(dict.fromkeys(problems), key=lambda p: (p.file or "", p.line or 0, p.col or 0))


STAND_INS = {"name": "study", "analysis": {"type": "montecarlo"}}  # for required sections left out


def checks_of_parts(source: Source, path: Path, failed: list[tuple], context: dict) -> list:
    """The cross-section problems of the study made of the parts that validated: each part with
    an error (a key of a block, else the block) is left out, a parameter fixed at 0 in its place
    so that its name is still known, and the rest validated again. Problems about a part left
    out are not reported (its own error says what is wrong)."""
    data, pruned = dict(source.data) if isinstance(source.data, dict) else None, set()
    for _ in range(3):  # a key left out may leave its block without a required one
        if data is None or any(not p for p in failed):
            return []  # the file as a whole is wrong: nothing to check across
        for where in failed:
            pruned.add(leave_out(data, where))
        try:
            study = Study.model_validate(data, context=context)
            break
        except ValidationError as exc:
            failed = error_paths(exc.errors(include_url=False), Study, data)
    else:
        return []
    try:
        found = check_study(study, study_context(study, path.resolve().parent), context["translate"])
    except (StudyError, ValueError):  # the parts alone do not make a study to check
        return []
    stand_ins = [f"'{p[1]}'" for p in pruned if p[0] == "parameters" and len(p) > 1]
    return [source.problem(where, message) for where, message in found
            if not any(where[:len(p)] == p or p[:len(where)] == where for p in pruned)
            and not (where[:1] in (("analysis",), ("correlation",))  # a stand-in's kind matters
                     and any(name in message for name in stand_ins))]


def leave_out(data: dict, where: tuple) -> tuple:
    """Leave out of the study's data the part that holds the error at `where` (a parameter: 0
    in its place); return the part's path."""
    section = where[0]
    blocks = ("parameters", "quantities", "model", "analysis", "execution")
    tag = section in ("model", "analysis") and where[1:2] == ("type",)  # the whole block is wrong
    if len(where) > 1 and section in blocks and not tag and isinstance(data.get(section), dict):
        data[section] = {k: v for k, v in data[section].items() if k != where[1]}
        if section == "parameters":
            data[section][where[1]] = 0
        return where[:2]
    data.pop(section, None)
    if section in STAND_INS:
        data[section] = STAND_INS[section]
    return (section,)
