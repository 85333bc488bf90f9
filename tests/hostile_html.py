"""Payloads for the texts a report shows but studyrun did not write, a results folder crafted to
hold them, and what in a page would run or reach off it: shared by tests/test_report_hostile.py,
the conformance suite's report check and the browser test.

`views` renders report.md as viewers other than report.html would: Python-Markdown and a
CommonMark parser (markdown-it) with raw HTML passed through, so an escape that only report.html's
renderer makes up for is found; `live` lists what would run (a script, an event handler, a
javascript: link) or make a request (a link, an image, a style off the page).
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import yaml

# One line of every way out: HTML elements and handlers, a script, links, an image and an
# autolink off the page, a code span's end, emphasis and a table cell's border.
PAYLOAD = ("<img src=x onerror=alert(1)> <script>alert(2)</script> [l](javascript:alert(3)) "
           "![i](http://127.0.0.1:9/i.png) <http://127.0.0.1:9/a> ` <svg onload=alert(4)> ` "
           "*e* _u_ | x")
# Several lines: an HTML block, a link reference defined and used, an indented and a fenced block.
BLOCKS = (f"{PAYLOAD}\n<div onmouseover=alert(5)>d</div>\n\n[r]: javascript:alert(6)\n\n"
          "[r] and [r][]\n\n# h\n- item\n\n    <b>indented</b>\n```\n<i>fenced</i>\n```\n")
# A file name that closes a code span: `NAME` puts the image outside it.
CODE_BREAK = "runs` <img src=x onerror=alert(7)> `.csv"


def views(markdown_text: str) -> dict[str, str]:
    """report.md as HTML by renderers that pass raw HTML through."""
    import markdown
    from markdown_it import MarkdownIt

    return {"python-markdown": markdown.markdown(markdown_text,
                                                 extensions=["tables", "fenced_code"]),
            "commonmark": MarkdownIt("commonmark", {"html": True}).enable("table")
            .render(markdown_text)}


class Page(HTMLParser):
    """The elements of a page (tag, attributes, the text of a script or style) and its text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.texts: list[str] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self._inside: str | None = None
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        if tag in ("script", "style"):
            self._inside = tag
            (self.scripts if tag == "script" else self.styles).append("")

    def handle_startendtag(self, tag, attrs):
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag):
        if tag == self._inside:
            self._inside = None

    def handle_data(self, data):
        if self._inside == "script":
            self.scripts[-1] += data
        elif self._inside == "style":
            self.styles[-1] += data
        else:
            self.texts.append(data)

    @property
    def text(self) -> str:
        return "".join(self.texts)


FIGURE = re.compile(r"figures/[A-Za-z0-9_-][A-Za-z0-9_.-]*\.png")
OFF_PAGE = re.compile(r"url\((?!\s*['\"]?(#|data:image/))")  # a style's url() to anything else
SCHEME = re.compile(r"\b(?!data:image/)[a-z][a-z0-9+.-]*:", re.I)
NEVER = {"iframe", "object", "embed", "base", "link", "form", "frame", "frameset", "meta",
         "portal", "applet", "input", "button", "textarea", "select", "video", "audio", "source"}


def live(html: str, page_script: str | None = None) -> list[str]:
    """What in `html` would run or reach off the page: every script (but one whose text holds
    `page_script`, report.html's own), an event handler, a link that is not an #anchor, an image
    that is not a figure or inline data, any other element that loads or submits."""
    page = Page(html)
    found = []
    ours = [s for s in page.scripts if page_script is not None and page_script in s]
    found += [f"script {s[:60]!r}" for s in page.scripts if s not in ours[:1]]
    for tag, attributes in page.elements:
        if tag == "meta" and page_script is not None and set(attributes) <= {"charset", "name",
                                                                              "content"}:
            continue  # report.html's own head
        if tag in NEVER:
            found.append(f"<{tag} {attributes}>")
        for name, value in attributes.items():
            if name.startswith("on"):
                found.append(f"<{tag} {name}={value!r}>")
            if name in ("href", "xlink:href") and not value.startswith(("#", "data:image/")):
                found.append(f"<{tag} {name}={value!r}>")
            if name == "src" and not (FIGURE.fullmatch(value) or value.startswith("data:image/")):
                found.append(f"<{tag} src={value!r}>")
            if name in ("style", "action", "formaction", "data", "srcset", "poster", "background"
                        ) and (OFF_PAGE.search(value) or name != "style" and SCHEME.search(value)):
                found.append(f"<{tag} {name}={value!r}>")
    for style in page.styles:
        if "@import" in style or OFF_PAGE.search(style):
            found.append(f"style {style[:60]!r}")
    return found


def text_of(html: str) -> str:
    """The text a reader sees of a page (no script, no style), entities decoded."""
    return Page(html).text


MODEL = '''
def f(a, b):
    return {"y": a + 2 * b, "z": a * b}
'''


def model_study(folder: Path, description: str = "plain", analysis: dict | None = None) -> Path:
    """A small study of a python model (inputs a, b; quantities y, z) in `folder`."""
    (folder / "model.py").write_text(MODEL)
    study = {"name": "hostile", "description": description,
             "model": {"type": "python", "function": "model:f"},
             "parameters": {"a": {"bounds": [0, 1]}, "b": {"bounds": [0, 1]}},
             "quantities": {"y": "y", "z": "z"},
             "analysis": analysis or {"type": "montecarlo", "samples": 16},
             "execution": {"scheduler": "sync"}}
    (folder / "study.yaml").write_text(yaml.safe_dump(study))
    return folder / "study.yaml"


def craft(out: Path, study: dict, analysis: dict) -> None:
    """A results folder's study.yaml and analysis.json as someone else wrote them: the digest
    that ties them matches, as a crafted folder's would."""
    from studyrun.results.outputs import DIGEST_KEY, study_digest

    text = yaml.safe_dump(study)
    (out / "study.yaml").write_text(text)
    analysis[DIGEST_KEY] = study_digest(text)
    (out / "analysis.json").write_text(json.dumps(analysis))


def crafted_results(folder: Path, payload: str, blocks: str, code_break: str) -> Path:
    """A Monte Carlo's results folder whose texts hold payloads, its report rebuilt by `studyrun
    report` as a reader of the folder would: the description `blocks`; a parameter `a{payload}`
    and a quantity `y{payload}` (study.yaml and analysis.json); every provenance string, of the
    study, its git commit, the given runs' file (`code_break`, in a code span) and the results it
    builds on."""
    from conftest import run_cli

    done = run_cli("run", model_study(folder), "--out", folder / "out")
    assert done.returncode == 0, done.stderr
    out = folder / "out"
    study = yaml.safe_load((out / "study.yaml").read_text())
    a, y = f"a{payload}", f"y{payload}"
    study["description"] = blocks
    study["parameters"] = {a: study["parameters"]["a"], "b": study["parameters"]["b"]}
    study["quantities"] = {y: "y + 0 * (z<y) * (y>z)", "z": "z"}  # a tag to Python-Markdown
    analysis = json.loads((out / "analysis.json").read_text())
    analysis["results"] = {y: analysis["results"]["y"], "z": analysis["results"]["z"]}
    for entry in analysis["results"].values():
        entry["correlations"] = {a: entry["correlations"]["a"], "b": entry["correlations"]["b"]}
    provenance = analysis["provenance"]
    for key in ("studyrun", "python", "started", "finished", "study_sha256"):  # seed: a count
        provenance[key] = f"{key}{payload}"
    provenance["git"] = {"commit": f"{code_break}{payload}", "dirty": True}
    provenance["given"] = {"file": code_break, "rows": payload}
    provenance["builds_on"] = {"study": f"s{payload}", "folder": f"f{payload}",
                               "study_yaml_sha256": code_break}
    craft(out, study, analysis)
    done = run_cli("report", out)
    assert done.returncode == 0, done.stderr
    return out
