"""The one registry of model and analysis types: studyrun's own, found in the modules of
`studyrun.models` and `studyrun.analyses`, and other packages', registered through the entry point
groups `studyrun.models` and `studyrun.analyses` (`NAME = module:Class`, NAME the class's `type`).

The study's unions and so its JSON Schema, the docs' tutorials, the conformance checks,
`studyrun predict` and the results folder's list of files are all read from here.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Callable

from studyrun.analyses.base import AnalysisSpec, FixedDesignAnalysis, IterativeAnalysis
from studyrun.core.errors import StudyrunError
from studyrun.core.plugin import type_tag
from studyrun.core.text import one_line
from studyrun.models.base import ModelSpec

# The order users meet studyrun's own types in (the docs, the `one of:` of an error, the schema);
# a type not named here follows them by name, and other packages' types follow studyrun's.
ORDER = {"models": ("python", "command", "ode", "stockflow", "pysd"),
         "analyses": ("montecarlo", "sweep", "sobol", "shapley", "morris", "fast", "rbd_fast",
                      "delta", "pawn", "dgsm", "doe", "local", "gradient", "surrogate",
                      "calibrate", "optimize", "reliability", "scenarios")}
BASES: dict[str, tuple[type, ...]] = {"models": (ModelSpec,),
                                      "analyses": (FixedDesignAnalysis, IterativeAnalysis)}


class PluginError(StudyrunError):
    """An installed package registers a type that cannot be used; names its entry point."""


@dataclass(frozen=True)
class Registry:
    """Every type a study may name, in order: type -> class."""

    models: dict[str, type[ModelSpec]]
    analyses: dict[str, type[AnalysisSpec]]

    def results_files(self) -> tuple[str, ...]:
        """The files analyses write into a results folder besides the common ones."""
        return tuple(dict.fromkeys(name for cls in self.analyses.values()
                                   for name in cls.results_files))

    def predicting(self) -> list[str]:
        """The analysis types whose results `studyrun predict` reads."""
        return [kind for kind, cls in self.analyses.items() if cls.predicts is not None]

    def predictor(self, kind: Any) -> Callable[..., dict[str, Any]] | None:
        """The function that predicts from a `kind` analysis's results; None: it does not."""
        cls = self.analyses.get(kind) if isinstance(kind, str) else None
        if cls is None or cls.predicts is None:
            return None
        module, _, name = cls.predicts.partition(":")
        function: Callable[..., dict[str, Any]] = getattr(importlib.import_module(module), name)
        return function

    def correlated(self) -> list[str]:
        """The analysis types whose designs draw correlated inputs."""
        return sorted(kind for kind, cls in self.analyses.items()
                      if cls.without_correlation is None)


@cache
def registry() -> Registry:
    """The registry of this process: studyrun's types and the installed packages' (PluginError
    for one that cannot be used)."""
    return Registry(**{group: gathered(group) for group in ("models", "analyses")})


def gathered(group: str) -> dict[str, Any]:
    """A group's types: studyrun's own in ORDER, then the outside ones by name."""
    own = {str(type_tag(cls)): cls for cls in own_types(group)}
    order = ORDER[group]
    found = dict(sorted(own.items(), key=lambda item: (
        order.index(item[0]) if item[0] in order else len(order), item[0])))
    outside: dict[str, tuple[type, EntryPoint]] = {}
    for point in sorted(entry_points(group=f"studyrun.{group}"), key=lambda p: p.name):
        cls = loaded(point, group)
        tag = type_tag(cls)
        if tag in found:
            raise PluginError(f"{named(point)}: type {tag!r} is studyrun's own already "
                              f"({found[tag].__module__}.{found[tag].__qualname__}); give it "
                              "another name")
        if tag in outside:
            raise PluginError(f"{named(point)}: type {tag!r} is registered by "
                              f"{named(outside[tag][1])} too; uninstall one of them")
        outside[str(tag)] = (cls, point)
    return found | {tag: cls for tag, (cls, _) in outside.items()}


def own_types(group: str) -> list[type]:
    """The classes of studyrun's own package for the group (studyrun.models, studyrun.analyses)
    that a study names by a `type`."""
    package = importlib.import_module(f"studyrun.{group}")
    found: list[type] = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for value in vars(module).values():
            if (isinstance(value, type) and issubclass(value, BASES[group]) and value not in found
                    and type_tag(value) is not None
                    and value.__module__.startswith(module.__name__)):
                found.append(value)
    return found


def loaded(point: EntryPoint, group: str) -> type:
    """The class an entry point names, checked: a type of the group's base with a `type` tag
    equal to the entry point's name."""
    try:
        cls = point.load()
    except Exception as error:  # anything an outside package's import raises
        raise PluginError(f"{named(point)}: cannot be loaded ({type(error).__name__}: "
                          f"{one_line(str(error))}); fix or uninstall that package") from None
    bases = " or ".join(f"{base.__module__}.{base.__qualname__}" for base in BASES[group])
    if not (isinstance(cls, type) and issubclass(cls, BASES[group])):
        what = f"{cls.__module__}.{cls.__qualname__}" if isinstance(cls, type) else "it"
        raise PluginError(f"{named(point)}: {what} is not a subclass of {bases}")
    tag = type_tag(cls)
    if tag is None:
        raise PluginError(f"{named(point)}: {cls.__qualname__} has no `type: Literal[...]` "
                          "field naming its type")
    if tag != point.name:
        raise PluginError(f"{named(point)}: the class's type is {tag!r}; the entry point's "
                          "name must be its type")
    return cls


def named(point: EntryPoint) -> str:
    """An entry point as an error names it: what it says, its group and its distribution."""
    dist = getattr(point, "dist", None)
    source = f", from {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {point.name} = {point.value} (group {point.group}{source})"
