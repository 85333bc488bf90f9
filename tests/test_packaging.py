"""The package as a wheel installs it: report.html's styles and script are package data, read
through importlib.resources from an installed (not editable) copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest
from conftest import REPO

STATIC = ["studyrun/results/report/static/report.css", "studyrun/results/report/static/report.js"]

CHECK = """
import studyrun.results.report.html as page
assert page.__file__.startswith({site!r}), page.__file__
html = page.build_html(".", "# A title", "A title")
assert page.static("report.css") in html and page.static("report.js") in html
assert "table.sortable" in html and "function compare" in html
print("ok")
"""


@pytest.mark.slow
def test_a_wheel_carries_the_report_pages_styles_and_script(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(REPO / "studyrun", source / "studyrun",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", tmp_path / "wheels", source],
                   check=True, capture_output=True, cwd=tmp_path)
    wheel, = (tmp_path / "wheels").glob("studyrun-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert set(STATIC) <= set(names), [n for n in names if "report/" in n]
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                    site, wheel], check=True, capture_output=True)
    env = {**os.environ, "PYTHONPATH": str(site)}
    checked = subprocess.run([sys.executable, "-c", CHECK.format(site=str(site))], env=env,
                             capture_output=True, text=True, cwd=tmp_path)
    assert checked.stdout.strip() == "ok", checked.stderr
