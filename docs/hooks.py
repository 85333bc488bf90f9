"""MkDocs hooks: the pages that must never drift from the code are generated at build time.

- reference/study-format.md from the study file's JSON Schema (`studyrun schema`),
- reference/cli.md from the command line's own parser,
- tutorials/PAGE.md, one per analysis type of the registry (its Tutorials navigation too, set
  in on_config): the user's text in docs/tutorials/PAGE.md with its
  example's study file, run, figures and numbers filled in from running that example at build
  time (so a number on a page is always the example's own), then the type's other examples.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "studies"
TUTORIALS = ROOT / "docs" / "tutorials"
sys.path.insert(0, str(ROOT))

GROUPS = {
    "Parameters": ("Uniform", "Normal", "LogNormal", "TruncNormal", "Triangular", "LogUniform",
                   "Beta", "Gamma", "Discrete", "Bounds", "Fixed"),
    "Execution": ("Execution", "Cluster"),
}
RUNS: dict[str, dict] = {}  # tutorial page -> its example's run, from on_files to the pages


class PluginError(Exception):
    """A tutorial that cannot be built: MkDocs stops with this message."""


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
    """Add the generated pages, run the tutorials' examples and add their figures."""
    from mkdocs.exceptions import PluginError as MkDocsError
    from mkdocs.structure.files import File

    pages = {"reference/study-format.md": study_format(), "reference/cli.md": command_line()}
    for path, text in pages.items():
        files.append(File.generated(config, path, content=text))
    tutorial_pages = tutorials()
    texts = {path.stem for path in TUTORIALS.glob("*.md")}
    if texts - set(tutorial_pages.values()):
        raise MkDocsError(f"docs/tutorials/ holds texts of no analysis type: "
                          f"{sorted(texts - set(tutorial_pages.values()))}")
    try:
        RUNS.clear()
        RUNS.update(run_examples(tutorial_pages))
    except PluginError as error:
        raise MkDocsError(str(error)) from None
    for run in RUNS.values():
        for stem, (_, svg) in run["figures"].items():
            files.append(File.generated(config, f"tutorials/figures/{run['example']}/{stem}.svg",
                                        content=svg))
    return files


def on_page_markdown(markdown, page, config, files):
    """A tutorial's text with its example's run filled in; other pages as they are."""
    from mkdocs.exceptions import PluginError as MkDocsError

    uri = page.file.src_uri
    if not (uri.startswith("tutorials/") and uri.count("/") == 1):
        return markdown
    try:
        return tutorial_page(Path(uri).stem, markdown, RUNS[Path(uri).stem])
    except PluginError as error:
        raise MkDocsError(str(error)) from None


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
    """analysis type -> its tutorial's page name (`rbd_fast` -> `rbd-fast`), one per type of the
    registry, in its order: the text is docs/tutorials/PAGE.md, the results come from running
    the example its front matter names."""
    from studyrun.study.spec.registry import registry

    return {kind: kind.replace("_", "-") for kind in registry().analyses}


def tutorial_text(page: str) -> tuple[dict, str]:
    """A tutorial's front matter (`example: NAME`, the study in studies/ it runs) and text."""
    path = TUTORIALS / f"{page}.md"
    if not path.is_file():
        raise PluginError(f"no tutorial text for analysis type {page!r}: write {path.relative_to(ROOT)}"
                          " (front matter `example: NAME`, then the page)")
    parts = re.fullmatch(r"---\n(.*?)\n---\n(.*)", path.read_text(), re.DOTALL)
    meta = yaml.safe_load(parts.group(1)) if parts else None
    if not isinstance(meta, dict) or not (STUDIES / f"{meta.get('example')}.yaml").is_file():
        raise PluginError(f"{path.relative_to(ROOT)}: its front matter (`---`, then `example: NAME`, "
                          "then `---`) names no study of studies/")
    return meta, parts.group(2)


def run_examples(pages: dict[str, str]) -> dict[str, dict]:
    """Run each tutorial's example into a temporary folder: page -> its analysis.json, the run's
    closing line and its report's figures (file name -> (caption, SVG)), read before the folder
    goes. Results never depend on the scheduler, so the examples run in this process (`sync`)."""
    import contextlib
    import io
    import tempfile

    import studyrun
    from studyrun.cli import describe_runs_done, show_warnings

    done = {}
    with tempfile.TemporaryDirectory(prefix="studyrun-tutorials-") as folder:
        for kind, page in pages.items():
            name = tutorial_text(page)[0]["example"]
            out = Path(folder) / name
            said = io.StringIO()  # what `studyrun run` prints on stderr before its closing line
            with contextlib.redirect_stderr(said):
                analysis = studyrun.run(STUDIES / f"{name}.yaml", out, scheduler="sync").analysis
            if analysis["analysis"] != kind:
                raise PluginError(f"docs/tutorials/{page}.md: its example {name} is a "
                                  f"{analysis['analysis']} study, not {kind}")
            captions = re.findall(r"!\[([^\]]*)\]\(figures/([^)]+)\.png\)",
                                  (out / "report.md").read_text())
            said_lines = [line for line in said.getvalue().splitlines()
                          if line.startswith("studyrun: ")]
            shown = sum(line.startswith("studyrun: warning: ") for line in said_lines)
            warned = io.StringIO()  # the warnings `studyrun run` prints after its closing line
            with contextlib.redirect_stderr(warned):
                show_warnings(analysis["warnings"][shown:], Path("results", name, "analysis.json"))
            done[page] = {"example": name, "analysis": analysis, "said": said_lines,
                          "closing": f"{name}: {describe_runs_done(analysis['runs'])}; "
                                     f"results in results/{name}\n{warned.getvalue()}".strip(),
                          "figures": {stem: (caption, (out / "figures" / f"{stem}.svg").read_bytes())
                                      for caption, stem in captions}}
    return done


def tutorial_page(page: str, text: str, run: dict) -> str:
    """A tutorial's text with its example's study file, command, figures and numbers filled in
    (Jinja; a name the run's analysis.json lacks is an error, so a page cannot outlive its
    example), then the other examples of its type."""
    import jinja2

    name = run["example"]
    figures = run["figures"]

    def figure(stem: str) -> str:
        if stem not in figures:
            raise PluginError(f"docs/tutorials/{page}.md: {name}'s report draws no figure {stem!r}"
                              f" (it draws {', '.join(figures) or 'none'})")
        return f"![{figures[stem][0]}](figures/{name}/{stem}.svg)"

    def expect(holds: bool, claim: str) -> str:
        """A claim of the text about the run, checked: `{{ expect(a > b, "a ranks first") }}`."""
        if not holds:
            raise PluginError(f"docs/tutorials/{page}.md: no longer true of {name}'s run: {claim}")
        return ""

    study = (STUDIES / f"{name}.yaml").read_text().strip()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             autoescape=False)
    env.filters["num"] = lambda value, digits=4: (
        str(value) if isinstance(value, int) else f"{float(value):.{digits}g}")
    env.globals.update(
        results=run["analysis"]["results"], runs=run["analysis"]["runs"],
        design=run["analysis"].get("design", {}), expect=expect, figure=figure,
        figures=lambda: "\n\n".join(figure(stem) for stem in figures),
        study=lambda: f'```yaml title="studies/{name}.yaml"\n{study}\n```',
        run=lambda: "\n".join(["```console", f"$ studyrun run studies/{name}.yaml", *run["said"],
                                run["closing"], "```"]))
    try:
        body = env.from_string(text).render()
    except jinja2.TemplateError as error:
        raise PluginError(f"docs/tutorials/{page}.md: {error} (in {name}'s analysis.json)") from None
    return body + other_examples(run["analysis"]["analysis"], name)


def other_examples(kind: str, shown: str) -> str:
    """The section naming the other example studies of a type, each with its description; one
    starting `from` another's results after it; one on a cluster with the cookbook's page."""
    started = re.findall(r'--8<-- "studies/([^"]+)"',
                         (ROOT / "docs" / "getting-started.md").read_text())
    here, on_clusters = [], []
    for path in sorted(STUDIES.glob("*.yaml"), key=lambda path: (path.name not in started, path.name)):
        data = yaml.safe_load(path.read_text())
        if data["analysis"]["type"] == kind and path.stem != shown:
            (on_clusters if runs_on_cluster(data) else here).append((path, data))
    lines, after = [], ""
    for path, data in in_run_order(here):
        if any("results" in Path(text).parts for text in froms(data["analysis"])):
            after = " (one that starts `from` another's results after that one)"
        lines += [f"- `studies/{path.name}`: " + " ".join(str(data.get("description", "")).split())]
    for path, data in on_clusters:
        lines += [f"- `studies/{path.name}`: " + " ".join(
            [*str(data.get("description", "")).split(), "It needs a batch system and dask-jobqueue;",
             "see [On a SLURM cluster](../cookbook/slurm.md)."])]
    if not lines:
        return ""
    return "\n".join(["", "## More examples", "",
                      f"Each runs the same way, `studyrun run studies/NAME.yaml`{after}:", "",
                      *lines, ""])


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


