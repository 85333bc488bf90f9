"""report.html: report.md as one self-contained page, for people who would rather look than read.

The page is report.md rendered by Python-Markdown, each figure inlined as the SVG drawn beside
its PNG (figures/NAME.svg; the PNG as a data URI where no SVG is), styles and a small script
(static/report.css, static/report.js) inline: no request leaves the page. report.md escapes
every text studyrun did not write; the renderer is safe even where it did not (`render`): raw
HTML in the Markdown is shown as text, and a link or an image may only point inside the page
(an #anchor, a figure of figures/). Tables of more than a few rows sort by a click on a
column's header; a table of more than LONG rows shows its first LONG under a filter box, the
rest on demand (a study of 1,000 parameters).
"""

from __future__ import annotations

import base64
import functools
import html
import itertools
import re
from importlib import resources
from pathlib import Path

LONG = 50  # rows a long table shows before "show all"
_FIGURE = r"figures/([A-Za-z0-9_-][A-Za-z0-9_.-]*)\.png"  # the names Figures.save writes
_IMAGE = re.compile(rf'<img alt="([^"]*)" src="{_FIGURE}"\s*/?>')
_LOCAL_IMAGE = re.compile(_FIGURE)
_LOCAL_LINK = re.compile(r"#[A-Za-z0-9_.:-]*")
_SVG_START = re.compile(r"<svg\b")
_ID = re.compile(r'\bid="([^"]+)"')


def build_html(folder: Path, text: str, title: str) -> str:
    """The page for report.md's `text`, its figures read from folder/figures."""
    body = render(text)
    count = itertools.count(1)
    body = _IMAGE.sub(lambda m: figure(Path(folder) / "figures", m.group(2),
                                       html.unescape(m.group(1)), next(count)), body)
    return PAGE.format(title=html.escape(title), style=static("report.css"),
                       script=static("report.js"), long=LONG, body=body)


@functools.cache
def static(name: str) -> str:
    """A file of the page's own (its styles, its script), shipped as package data in static/."""
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def render(text: str) -> str:
    """Markdown as HTML, with tables and fenced code; raw HTML in it is text, and every link or
    image that points outside the page is its text alone."""
    import markdown

    return markdown.markdown(text, extensions=["tables", "fenced_code", _safe()],
                             output_format="html")


def _safe():
    """The extension that makes Python-Markdown pass no HTML through and link nowhere else."""
    from markdown.extensions import Extension
    from markdown.treeprocessors import Treeprocessor

    class LocalOnly(Treeprocessor):
        def run(self, root):
            for element in root.iter():
                local = (element.tag == "a" and _LOCAL_LINK.fullmatch(element.get("href", ""))
                         or element.tag == "img" and _LOCAL_IMAGE.fullmatch(element.get("src", "")))
                if element.tag in ("a", "img") and not local:
                    if element.tag == "img":
                        element.text = element.get("alt", "")
                    element.tag = "span"
                    element.attrib.clear()

    class Safe(Extension):
        def extendMarkdown(self, md):
            md.preprocessors.deregister("html_block")
            for name in ("html", "autolink", "automail"):
                md.inlinePatterns.deregister(name)
            md.treeprocessors.register(LocalOnly(md), "local_only", 15)  # after inline (20)

    return Safe()


def figure(figures: Path, name: str, caption: str, number: int) -> str:
    """A <figure> holding the figure's SVG (its ids made unique to this page), else its PNG."""
    svg, png = figures / f"{name}.svg", figures / f"{name}.png"
    if svg.exists():
        drawing = svg.read_text(encoding="utf-8")
        drawing = drawing[_SVG_START.search(drawing).start():]  # no XML prolog, no DOCTYPE
        drawing = unique_ids(drawing, f"f{number}-")
    elif png.exists():
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        drawing = f'<img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
    else:
        return f"<p><em>Figure {html.escape(name)} is missing from figures/.</em></p>"
    return (f'<figure id="figure-{html.escape(name)}">{drawing}'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>")


def unique_ids(svg: str, prefix: str) -> str:
    """Every id of one SVG, and each reference to it, given a prefix: matplotlib's ids (clip
    paths, markers) repeat from one figure to the next."""
    ids = set(_ID.findall(svg))
    if not ids:
        return svg
    names = "|".join(re.escape(i) for i in sorted(ids, key=len, reverse=True))
    svg = re.sub(rf'\bid="({names})"', lambda m: f'id="{prefix}{m.group(1)}"', svg)
    return re.sub(rf"#({names})\b(?=[\"')])", lambda m: f"#{prefix}{m.group(1)}", svg)


def write_html(folder: Path, text: str, title: str) -> None:
    """report.html beside report.md (atomically, as every output)."""
    from studyrun.results import outputs

    outputs.write_text(Path(folder) / "report.html", build_html(folder, text, title))


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="studyrun">
<title>{title}</title>
<style>
{style}</style>
</head>
<body>
{body}
<script>var LONG = {long};
{script}</script>
</body>
</html>
"""
