"""Texts studyrun did not write reach report.md escaped and report.html inert (issue 28, point 1):
a description, parameter and quantity names, expressions, a `from:` file name that closes its
code span, provenance strings and error texts of a crafted analysis.json rebuilt by `studyrun
report DIR`. report.md is read by renderers that pass raw HTML through (hostile_html.views):
no element, handler, link or image of a payload; report.html holds no script but its own, and
shows every payload as the text it is. A study of hundreds of quantities draws the figures of the
first few (issue 28, point 6), its tables list every one."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import run_cli
from hostile_html import (
    BLOCKS,
    CODE_BREAK,
    PAYLOAD,
    craft,
    crafted_results,
    live,
    model_study,
    text_of,
    views,
)

from studyrun.results.report.figures import Figures
from studyrun.results.report.html import build_html, render
from studyrun.results.report.markdown import Markdown, code, escape, fence, paragraphs, table
from studyrun.results.report.wide import QUANTITIES_DRAWN

PAGE_SCRIPT = "var LONG = "  # report.html's own script starts so


def assert_inert(markdown_text: str, html: str, *shown: str) -> None:
    """report.md makes nothing of a payload in any renderer, report.html runs and loads nothing
    but its own, and each text of `shown` is on the page as written."""
    for renderer, rendered in views(markdown_text).items():
        assert live(rendered) == [], renderer
    assert live(html, PAGE_SCRIPT) == []
    page = text_of(html)
    for text in shown:
        assert text in page, text


def test_each_escaping_helper_makes_text_of_every_payload():
    cases = [(escape(PAYLOAD), PAYLOAD), (paragraphs(BLOCKS), "<div onmouseover=alert(5)>d</div>"),
             (table(["name", PAYLOAD], [[PAYLOAD, 1.5]]), PAYLOAD),
             (f"from {code(CODE_BREAK)}.", CODE_BREAK), (f"- {escape(PAYLOAD)}", PAYLOAD),
             (f"### {escape(PAYLOAD)}", PAYLOAD), (f"*{escape(PAYLOAD)}*", PAYLOAD),
             (f"{escape('x [l]')}(javascript:alert(9))", "x [l](javascript:alert(9))"),
             (fence(f"{BLOCKS}\n````\n<script>alert(8)</script>", "yaml"), "<i>fenced</i>")]
    for markdown_text, shown in cases:
        for renderer, html in [*views(markdown_text).items(), ("report.html", render(markdown_text))]:
            assert live(html) == [], (renderer, markdown_text)
            assert shown in text_of(html), (renderer, markdown_text)
    # ordinary text reads the same
    for text in ("peak_time", "a * b", "in [0, 1] here", "p < 0.05 -> q", "R&D", "-1.5", r"C:\data\x.csv"):
        assert escape(text) == text
    assert table(["x"], [[Markdown("**b**")]]).endswith("| **b** |")


def test_report_html_passes_no_raw_html_through_and_links_only_inside_the_page(tmp_path):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "f.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"></svg>')
    hostile = (f"# t\n\n{BLOCKS}\n\n<style>body {{ background: url(http://127.0.0.1:9/s) }}"
               "</style>\n\n![kept](figures/f.png) [to the top](#t) [off](http://127.0.0.1:9/)\n")
    html = build_html(tmp_path, hostile, "t")
    assert_inert("", html, "<script>alert(2)</script>", "<div onmouseover=alert(5)>d</div>")
    assert html.count("<figure") == 1 and '<a href="#t">to the top</a>' in html


@pytest.mark.slow
def test_a_description_is_text_in_report_md_and_report_html(tmp_path):
    result = run_cli("run", model_study(tmp_path, BLOCKS), "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    assert_inert((out / "report.md").read_text(), (out / "report.html").read_text(),
                 PAYLOAD, "<div onmouseover=alert(5)>d</div>", "[r]: javascript:alert(6)")


@pytest.mark.slow
def test_a_from_file_name_that_closes_its_code_span_stays_inside_it(tmp_path):
    rows = "".join(f"{i / 10},{1 - i / 10},{i}\n" for i in range(10))
    (tmp_path / CODE_BREAK).write_text(f"a,b,y\n{rows}")
    study = {"name": "given", "parameters": {"a": {"bounds": [0, 1]}, "b": {"bounds": [0, 1]}},
             "analysis": {"type": "montecarlo", "from": CODE_BREAK}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    result = run_cli("run", tmp_path / "study.yaml", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    markdown_text = (tmp_path / "out" / "report.md").read_text()
    assert f"``{tmp_path / CODE_BREAK}``" in markdown_text  # fenced by two backticks
    assert_inert(markdown_text, (tmp_path / "out" / "report.html").read_text(), CODE_BREAK)


@pytest.mark.slow
def test_a_crafted_results_folder_rebuilt_by_studyrun_report_shows_its_texts_as_text(tmp_path):
    out = crafted_results(tmp_path, PAYLOAD, BLOCKS, CODE_BREAK)
    a, y = f"a{PAYLOAD}", f"y{PAYLOAD}"
    assert_inert((out / "report.md").read_text(), (out / "report.html").read_text(),
                 a, y, "y + 0 * (z<y) * (y>z)", f"started{PAYLOAD}", f"s{PAYLOAD}",
                 f"f{PAYLOAD}", "[r]: javascript:alert(6)", CODE_BREAK)
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert all(name.startswith(("hist-", "scatter-")) and "/" not in name for name in figures)
    assert len(figures) == 8, figures  # a histogram and a scatter per quantity, PNG and SVG


@pytest.mark.slow
def test_error_and_warning_texts_of_a_crafted_analysis_json_are_text(tmp_path):
    study = model_study(tmp_path, analysis={"type": "morris", "trajectories": 8, "resamples": 10})
    result = run_cli("run", study, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    study = yaml.safe_load((out / "study.yaml").read_text())
    analysis = json.loads((out / "analysis.json").read_text())
    analysis["results"]["y"].update(error=f"e{PAYLOAD}", warnings=[f"w{PAYLOAD}"])
    craft(out, study, analysis)
    result = run_cli("report", out)
    assert result.returncode == 0, result.stderr
    assert_inert((out / "report.md").read_text(), (out / "report.html").read_text(),
                 f"e{PAYLOAD}", f"w{PAYLOAD}")

    analysis["results"]["z"]["mu_star"]["a"] = f"v{PAYLOAD}\x1b[2J"  # not what morris writes
    craft(out, study, analysis)
    result = run_cli("report", out)
    assert result.returncode == 2 and "\x1b" not in result.stderr
    assert result.stderr.strip().endswith(
        "not a studyrun results folder: analysis.json: `results.z.mu_star.a` must be a number; "
        "found a string; run its study again to write its results anew"), result.stderr


def test_figures_are_drawn_for_the_first_quantities_only(tmp_path):
    figures = Figures(tmp_path, quantities=2)
    asked = ["q1", "q2", "q1", "q3", "q2", "q4"]
    assert [figures.draws(q) for q in asked] == [True, True, True, False, True, False]
    assert figures.note() == ("*The figures show the first 2 of the 4 quantities; the tables list "
                              "every one.*")
    assert Figures(tmp_path).note() == "" and QUANTITIES_DRAWN == 10


@pytest.mark.slow
def test_a_csv_of_300_quantities_draws_the_figures_of_the_first_10_and_tables_every_one(tmp_path):
    names = [f"q{i:03d}" for i in range(300)]
    rows = "".join(f"{i / 40},{(i * 7 % 40) / 40},"
                   + ",".join(f"{(i * (j + 1)) % 13}" for j in range(300)) + "\n"
                   for i in range(40))
    (tmp_path / "runs.csv").write_text(f"a,b,{','.join(names)}\n{rows}")
    study = {"name": "many", "parameters": {"a": {"bounds": [0, 1]}, "b": {"bounds": [0, 1]}},
             "analysis": {"type": "montecarlo", "from": "runs.csv"}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(study))
    result = run_cli("run", tmp_path / "study.yaml", "--out", tmp_path / "out", timeout=90)
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    report = (out / "report.md").read_text()
    assert "The figures show the first 10 of the 300 quantities; the tables list every one." in report
    drawn = sorted(p.stem for p in (out / "figures").glob("*.png"))
    assert drawn == sorted(f"{kind}-{q}" for q in names[:10] for kind in ("hist", "scatter"))
    table_rows = [line.split(" | ")[0].strip("| ") for line in report.splitlines()
                  if line.startswith("| q") and not line.startswith("| quantity")]
    assert table_rows == names + names  # the summary and the Spearman table
    # a rebuilt report draws the same: the conformance checks rebuild every type's report


@pytest.mark.slow
def test_a_crafted_shapley_analysis_json_shows_its_names_and_warnings_as_text(tmp_path):
    """shapley's report: a parameter named with a payload in every map, the correlation table
    and the bar chart's tooltips; its warnings and the method named in the design."""
    study = model_study(tmp_path, analysis={"type": "shapley", "resamples": 10, "samples": {
        "total": 16, "outer": 4, "inner": 2}})
    text = yaml.safe_load(study.read_text())
    text["correlation"] = [["a", "b", 0.5]]
    study.write_text(yaml.safe_dump(text))
    result = run_cli("run", study, "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    study = yaml.safe_load((out / "study.yaml").read_text())
    analysis = json.loads((out / "analysis.json").read_text())
    name = f"a{PAYLOAD}"

    def renamed(value):
        if isinstance(value, dict):
            return {(name if key == "a" else key): renamed(item) for key, item in value.items()}
        return value

    analysis["results"] = renamed(analysis["results"])
    analysis["design"] = renamed(analysis["design"]) | {"method": f"m{PAYLOAD}"}
    analysis["results"]["y"]["warnings"] = [f"w{PAYLOAD}"]
    craft(out, study, analysis)
    result = run_cli("report", out)
    assert result.returncode == 0, result.stderr
    assert_inert((out / "report.md").read_text(), (out / "report.html").read_text(),
                 name, f"w{PAYLOAD}", f"m{PAYLOAD}")
