"""MkDocs hooks: the pages that must never drift from the code are generated at build time.

- reference/study-format.md from the study file's JSON Schema (`studyrun schema`),
- reference/cli.md from the command line's own parser,
- tutorials/NAME.md, one per analysis type of the registry (its Tutorials navigation too, set
  in on_config), from the example studies in studies/ that use it
  and the analysis module's own description. The example that getting-started.md shows leads
  its tutorial and the others follow by file name, except that a study starting `from` another's
  results comes after it; an example on a cluster is only named at the end (the cookbook
  covers it).
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path

import yaml
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GROUPS = {
    "Parameters": ("Uniform", "Normal", "LogNormal", "TruncNormal", "Triangular", "LogUniform",
                   "Beta", "Gamma", "Discrete", "Bounds", "Fixed"),
    "Execution": ("Execution", "Cluster"),
}


def on_config(config):
    """The Tutorials section of the navigation: one page per analysis type, in the registry's
    order, after the Guide."""
    from studyrun.study.spec.registry import registry

    pages = [{cls.tutorial or kind: f"tutorials/{kind.replace('_', '-')}.md"}
             for kind, cls in registry().analyses.items()]
    nav = [item for item in config["nav"] if "Tutorials" not in item]
    at = next(i for i, item in enumerate(nav) if "Guide" in item) + 1
    config["nav"] = [*nav[:at], {"Tutorials": pages}, *nav[at:]]
    return config


def on_files(files, config):
    """Add the generated pages to the site."""
    pages = {"reference/study-format.md": study_format(), "reference/cli.md": command_line()}
    pages |= {f"tutorials/{name}.md": text for name, text in tutorials().items()}
    for path, text in pages.items():
        files.append(File.generated(config, path, content=text))
    return files


def study_format() -> str:
    from studyrun.commands.schema import study_schema
    from studyrun.study.spec.registry import registry

    schema = study_schema()
    defs = schema["$defs"]
    lines = ["# Study file reference", "",
             "Generated from the study file's JSON Schema (`studyrun schema`, also in "
             "`schemas/study.schema.json`), so it says what the validator accepts. Editors that "
             "read JSON Schema complete and check study files with the first line "
             "`# yaml-language-server: $schema=../schemas/study.schema.json`.", "",
             "## Top level", "", keys_table(schema, defs), ""]
    grouped = {"Models": model_definitions(defs), **GROUPS,
               "Analyses": tuple(sorted(cls.__name__ for cls in registry().analyses.values()))}
    shown = set()
    for title, names in grouped.items():
        lines += [f"## {title}", ""]
        for name in names:
            if name in defs:
                lines += definition(name, defs[name], defs)
                shown.add(name)
    rest = sorted(set(defs) - shown)
    if rest:
        lines += ["## Parts of the blocks above", ""]
        for name in rest:
            lines += definition(name, defs[name], defs)
    return "\n".join(lines)


def model_definitions(defs: dict) -> tuple[str, ...]:
    """The registry's model types and the parts of their blocks that no other block uses."""
    from studyrun.study.spec.registry import registry

    def reached(name: str) -> set[str]:
        found, stack = set(), [name]
        while stack:
            for ref in re.findall(r'"#/\$defs/([^"]+)"', json.dumps(defs.get(stack.pop(), {}))):
                if ref not in found:
                    found.add(ref)
                    stack.append(ref)
        return found

    models = [cls.__name__ for cls in registry().models.values()]
    parts = set().union(*(reached(name) for name in models))
    others = set().union(*(reached(name) for name in defs if name not in parts | set(models)
                           and name != "Study"))
    return tuple(dict.fromkeys(name for model in models
                               for name in (model, *sorted(reached(model) - others))))


def definition(name: str, schema: dict, defs: dict) -> list[str]:
    kind = schema.get("properties", {}).get("type", {}).get("const")
    heading = f"### {name}" + (f" (`type: {kind}`)" if kind else "") + f" {{ #{name.lower()} }}"
    out = [heading, ""]
    if schema.get("description"):
        out += [" ".join(schema["description"].split()), ""]
    if schema.get("properties"):
        out += [keys_table(schema, defs), ""]
    return out


def keys_table(schema: dict, defs: dict) -> str:
    required = set(schema.get("required", []))
    rows = ["| key | type | default | meaning |", "| --- | --- | --- | --- |"]
    for key, item in schema.get("properties", {}).items():
        default = "required" if key in required else (
            f"`{json.dumps(item['default'])}`" if "default" in item else "")
        rows.append(f"| `{key}` | {type_of(item, defs)} | {default} | "
                    f"{' '.join(item.get('description', '').split()).replace('|', '/')} |")
    return "\n".join(rows)


def type_of(item: dict, defs: dict) -> str:
    if "$ref" in item:
        name = item["$ref"].split("/")[-1]
        return f"[{name}](#{name.lower()})"
    if "const" in item:
        return f"`{json.dumps(item['const'])}`"
    if "enum" in item:
        return " / ".join(f"`{json.dumps(v)}`" for v in item["enum"])
    for union in ("anyOf", "oneOf"):
        if union in item:
            return " or ".join(type_of(option, defs) for option in item[union])
    kind = item.get("type")
    if kind == "array":
        return f"list of {type_of(item.get('items', {}), defs)}"
    if kind == "object":
        values = item.get("additionalProperties")
        return f"mapping to {type_of(values, defs)}" if isinstance(values, dict) else "mapping"
    return str(kind) if kind else "any"


def command_line() -> str:
    from studyrun.cli import build_parser

    parser = build_parser()
    lines = ["# Command line reference", "",
             "Generated from the command line's own parser (`studyrun COMMAND --help` prints "
             "the same).", "", "```text", parser.format_help().strip(), "```", ""]
    commands = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, sub in commands.choices.items():
        lines += [f"## studyrun {name}", "", "```text", sub.format_help().strip(), "```", ""]
    return "\n".join(lines)


def tutorials() -> dict[str, str]:
    """One page per analysis type: its example studies, how to run them, what they compute."""
    from studyrun.study.spec.registry import registry

    kinds = registry().analyses
    started = re.findall(r'--8<-- "studies/([^"]+)"',
                         (ROOT / "docs" / "getting-started.md").read_text())
    studies: dict[str, list[tuple[Path, dict]]] = {}
    on_clusters: dict[str, list[tuple[Path, dict]]] = {}
    for path in sorted((ROOT / "studies").glob("*.yaml"),
                       key=lambda path: (path.name not in started, path.name)):
        data = yaml.safe_load(path.read_text())
        shelf = on_clusters if runs_on_cluster(data) else studies
        shelf.setdefault(data["analysis"]["type"], []).append((path, data))
    pages = {}
    reference = (ROOT / "docs" / "reference" / "results.md").read_text()
    for kind, cls in sorted(kinds.items()):
        module = inspect.getmodule(cls)
        about = inspect.getdoc(module) or ""
        lines = [f"# {kind}", "", about, ""]
        gives = results_section(reference, kind)
        if gives:
            lines += ["## What it gives", "", "analysis.json's `results`:", "", gives, ""]
        for path, data in in_run_order(studies.get(kind, [])):
            name = path.stem
            lines += [f"## Example: {name}", "",
                      " ".join(str(data.get("description", "")).split()), "",
                      f'```yaml title="studies/{path.name}"', path.read_text().strip(), "```", "",
                      "From the project's folder:", "", "```bash",
                      f"studyrun validate studies/{path.name}",
                      f"studyrun plan studies/{path.name}     # the design, before any run",
                      f"studyrun run studies/{path.name}      # into results/{data['name']}/",
                      "```", "",
                      f"Then open `results/{data['name']}/report.html`; analysis.json's "
                      "`results` holds the numbers (see [the results folder]"
                      "(../reference/results.md)).", ""]
        for path, data in on_clusters.get(kind, []):
            lines += [f"## On a cluster: {path.stem}", "",
                      " ".join([*str(data.get("description", "")).split(),
                                f"`studies/{path.name}` needs a batch system and dask-jobqueue;",
                                "see [On a SLURM cluster](../cookbook/slurm.md)."]), ""]
        pages[kind.replace("_", "-")] = "\n".join(lines)
    return pages


def runs_on_cluster(data: dict) -> bool:
    """Whether a study runs on a batch system (a cluster block as its scheduler): such an
    example is only named in its tutorial, the cookbook shows how to run it. (No hook's
    function is named on_...: MkDocs takes each for an event.)"""
    return isinstance((data.get("execution") or {}).get("scheduler"), dict)


def in_run_order(examples: list[tuple[Path, dict]]) -> list[tuple[Path, dict]]:
    """The examples in the order given, except that one whose analysis starts `from` another's
    results folder (`from: ../results/NAME`, or a file in it) comes after that other one."""
    names = {data["name"] for _, data in examples}
    needs = {data["name"]: {part for text in froms(data["analysis"])
                            for part in Path(text).parts if part in names} - {data["name"]}
             for _, data in examples}
    ordered: list[tuple[Path, dict]] = []
    waiting = list(examples)
    while waiting:
        done = {data["name"] for _, data in ordered}
        ready = next((item for item in waiting if needs[item[1]["name"]] <= done), waiting[0])
        ordered.append(ready)
        waiting.remove(ready)
    return ordered


def froms(block) -> list[str]:
    """Every `from:` text in a block of the study file, at any depth (analysis.from,
    analysis.start.from)."""
    if isinstance(block, dict):
        return [text for key, value in block.items()
                for text in ([value] if key == "from" and isinstance(value, str) else froms(value))]
    if isinstance(block, list):
        return [text for value in block for text in froms(value)]
    return []


def results_section(reference: str, kind: str) -> str:
    """The results folder reference's section for an analysis type (its `### kind` heading may
    name several types: `fast and rbd_fast`)."""
    sections = reference.split("\n### ")[1:]
    for section in sections:
        heading, _, body = section.partition("\n")
        if kind in heading.replace(" and ", " ").split(" (")[0].split():
            return f"*{heading.strip()}*: " + body.strip()
    return ""
