"""report.html opened in a real headless Chromium (Debian's, driven by Playwright): no console
error, no request off the page, every figure drawn with a size, every table there, sorting and
the long tables' filter working; a screenshot of each page is saved in the test's folder. The
page of a crafted results folder runs none of its payloads and asks nothing of anyone."""

from __future__ import annotations

import http.server
import re
import threading
from pathlib import Path

import pytest
from conftest import free_port, run_cli, run_example
from hostile_html import crafted_results

import studyrun

pytestmark = [pytest.mark.system, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
SCRIPT = Path(__file__).with_name("chromium.sh")
# As root, headless, with nothing that reaches for the network (it is closed here).
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium under Playwright, installed already: the tests install nothing."""
    from playwright.sync_api import sync_playwright

    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install it first with `sudo {SCRIPT} install`",
                    pytrace=False)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield launched
        launched.close()


def open_report(browser, folder: Path, dialogs: list | None = None):
    """The page of folder/report.html, with the console errors and the requests it made (and the
    messages of the dialogs it opened, dismissed, into `dialogs`)."""
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    errors, requests = [], []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    if dialogs is not None:
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto((folder / "report.html").as_uri())
    page.wait_for_load_state("load")
    return page, errors, requests


@pytest.mark.slow
@pytest.mark.parametrize("name, changes, tip", [
    ("ishigami-sobol", {}, "S1 of x1: "),  # each bar: its index and interval
    ("bowl-doe", {}, "(coded): mean "),  # each main effect and interaction mean
    ("zdt1-nsga2", {"generations: 100": "generations: 20"}, "Pareto point 1: f1 = "),  # and x
    ("flowers-morris", {}, None),
])
def test_the_page_renders_every_figure_and_table_offline(browser, tmp_path, name, changes, tip):
    folder = run_example(tmp_path, name, "{scheduler: threads}", **changes).folder
    markdown = (folder / "report.md").read_text()
    page, errors, requests = open_report(browser, folder)
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    assert errors == []
    assert all(url.startswith("file://") for url in requests), requests  # nothing off the page
    assert page.inner_text("h1") == name
    figures = page.query_selector_all("figure svg")
    assert len(figures) == markdown.count("](figures/") > 0
    for drawn in figures:
        box = drawn.bounding_box()
        assert box is not None and box["width"] > 100 and box["height"] > 100, box
    tables = len(re.findall(r"^\|---", markdown, re.M))
    assert len(page.query_selector_all("table")) == tables > 0
    assert "<img" not in (folder / "report.html").read_text()  # SVG, not pictures of text
    if tip is not None:  # what there is to explore: a tooltip on each bar or point
        tips = page.query_selector_all("figure svg g.tip")
        texts = [t.query_selector("title").text_content() for t in tips]
        assert any(tip in text for text in texts), texts[:5]
        assert all(t.bounding_box() is not None for t in tips)  # each drawn where one can point


@pytest.mark.slow
def test_a_long_table_filters_and_every_table_sorts(browser, tmp_path):
    """A Monte Carlo of 60 parameters: its table of rank correlations holds 60 rows, of which
    the page shows 50 under a filter box; a click on a header sorts by that column."""
    (tmp_path / "many.py").write_text("def model(**x):\n    return {'y': sum((i + 1) * v for i, v in "
                                      "enumerate(x.values()))}\n")
    parameters = "\n".join(f"  p{i:02d}: {{distribution: uniform, low: 0, high: 1}}" for i in range(60))
    (tmp_path / "study.yaml").write_text(
        "name: many\nseed: 1\nmodel: {type: python, function: many:model}\nparameters:\n"
        f"{parameters}\nquantities: {{y: y}}\nanalysis: {{type: montecarlo, samples: 200}}\n"
        "execution: {scheduler: sync}\n")
    studyrun.run(tmp_path / "study.yaml", tmp_path / "out")
    page, errors, _ = open_report(browser, tmp_path / "out")
    heading = "xpath=//h3[starts-with(., 'Rank correlations')]"
    table = page.locator(f"{heading}/following-sibling::table[1]")
    box = page.locator(f"{heading}/following-sibling::div[@class='filter'][1]//input")
    more = page.locator(f"{heading}/following-sibling::button[@class='more'][1]")
    rows = table.locator("tbody tr")
    assert rows.count() == 60 and table.locator("tbody tr:visible").count() == 50
    box.fill("p05")
    assert table.locator("tbody tr:visible").count() == 1
    box.fill("")
    more.click()
    assert table.locator("tbody tr:visible").count() == 60
    header = table.locator("th").nth(1)
    header.click()
    ascending = [float(v) for v in table.locator("tbody tr td:nth-child(2)").all_inner_texts()]
    assert ascending == sorted(ascending) and header.get_attribute("aria-sort") == "ascending"
    header.click()
    descending = [float(v) for v in table.locator("tbody tr td:nth-child(2)").all_inner_texts()]
    assert descending == sorted(ascending, reverse=True)
    page.screenshot(path=str(tmp_path / "many.png"), full_page=True)
    assert errors == []


@pytest.mark.slow
def test_studyrun_report_rebuilds_the_same_page(tmp_path):
    folder = run_example(tmp_path, "bowl-doe", "{scheduler: threads}").folder
    first = (folder / "report.html").read_text()
    (folder / "report.html").unlink()
    done = run_cli("report", folder)
    assert done.returncode == 0, done.stderr
    assert (folder / "report.html").read_text() == first


class Counted(http.server.BaseHTTPRequestHandler):
    """Counts every request made to it (any method), and answers 204."""

    hits: list[str] = []

    def do_GET(self):
        Counted.hits.append(self.path)
        self.send_response(204)
        self.end_headers()

    do_POST = do_HEAD = do_GET

    def log_message(self, *args):
        pass


@pytest.mark.slow
def test_no_payload_of_a_crafted_results_folder_runs_and_no_request_leaves_its_page(browser,
                                                                                    tmp_path):
    """A results folder whose description, names, provenance and a `from:` file name hold
    scripts, handlers, javascript: links and loads of a server on this machine, its report
    rebuilt by `studyrun report`: in Chromium no script of them runs (the title, a global, an
    alert), no element has a handler, a click on every link goes nowhere, and the server is
    never asked for anything."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Counted)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    Counted.hits = []
    run = "window.pwned=1;document.title='pwned';alert(1)"
    payload = (f"<script>{run};fetch('{url}/script')</script><img src=x onerror=\"{run}\"> "
               f"<svg onload=\"{run}\"></svg><img src={url}/img> ![i]({url}/markdown-image) "
               f"[click](javascript:{run}) <a href=\"javascript:{run}\">a</a> <{url}/autolink> "
               f"<iframe src={url}/frame></iframe><link rel=stylesheet href={url}/css> "
               f"<details open ontoggle=\"{run}\">d</details>")
    blocks = (f"{payload}\n<style>@import url({url}/import); body {{ background: url({url}/bg) }}"
              f"</style>\n\n[r]: javascript:{run}\n\n[r] [i][]\n\n[i]: {url}/reference\n")
    code_break = f"runs` <img src=x onerror=\"{run}\"> <img src={url}/code> `.csv"
    out = crafted_results(tmp_path, payload, blocks, code_break)
    dialogs: list[str] = []
    page, errors, requests = open_report(browser, out, dialogs)
    page.wait_for_timeout(500)  # for an image's onerror, a load
    for link in page.query_selector_all("a"):
        link.click()
    page.wait_for_timeout(200)
    assert page.title() == "hostile" and page.evaluate("window.pwned") is None
    assert dialogs == [] and errors == []
    handlers = page.evaluate("Array.from(document.querySelectorAll('*')).flatMap(e => Array.from("
                             "e.attributes).filter(a => a.name.startsWith('on')).map(a => a.name))")
    assert handlers == []
    assert all(url.startswith(("file://", "data:")) for url in requests), requests
    assert Counted.hits == []
    text = page.inner_text("body")
    assert f"<script>{run};fetch('{url}/script')</script>" in text and code_break in text
    page.screenshot(path=str(tmp_path / "hostile.png"), full_page=True)
    server.shutdown()
