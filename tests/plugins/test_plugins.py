"""A type is one package (issue 30, point 4): an outside package (tests/plugins/fixture), installed
with pip into a folder of its own, registers an analysis and a model through entry points; a study
runs with them from the command line, they pass studyrun.testing's checks, and a broken plug-in
is refused in one line naming its entry point. A studyrun type that leaves a hook unwritten is a
TypeError when its class is made."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Literal

import pytest

from studyrun.analyses.base import FixedDesignAnalysis, IterativeAnalysis
from studyrun.models.base import ModelSpec

pytestmark = pytest.mark.slow  # pip and the studyrun command in subprocesses

REPO = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).with_name("fixture")
STUDYRUN = Path(sys.executable).with_name("studyrun")  # this environment's command

STUDY = """\
name: ends
model: {type: linear, slope: 2}
parameters:
  a: {bounds: [0.1, 1.0]}
  b: {bounds: [0.1, 1.0]}
analysis: {type: extremes, points: 4}
"""


def studyrun(*args: str, site: Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """The studyrun command with `site` (installed plug-ins) on its path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    return subprocess.run([str(STUDYRUN), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The fixture package installed by pip (its pyproject's entry points), without network."""
    source = tmp_path_factory.mktemp("source") / "fixture"
    shutil.copytree(FIXTURE, source)  # pip builds in the source folder
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--no-build-isolation", "--disable-pip-version-check", "--no-cache-dir",
                    "--target", str(target), str(source)], check=True, timeout=300)
    return target


def test_an_outside_type_runs_a_study_from_the_command_line(site, tmp_path):
    (tmp_path / "study.yaml").write_text(STUDY)
    done = studyrun("run", "study.yaml", "--out", "out", site=site, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    analysis = json.loads((tmp_path / "out" / "analysis.json").read_text())
    assert analysis["analysis"] == "extremes"
    assert analysis["results"]["y"] == {"min": pytest.approx(0.3), "max": pytest.approx(3.0),
                                        "dropped_runs": 0}  # y = 2a + b along the diagonal
    assert (tmp_path / "out" / "extremes.csv").read_text().startswith("quantity,min,max\ny,")
    assert "## Extremes" in (tmp_path / "out" / "report.md").read_text()

    schema = json.loads(studyrun("schema", site=site, cwd=tmp_path).stdout)
    assert {"Extremes", "Linear"} <= set(schema["$defs"])

    # its file is the results folder's: another study in the folder clears it
    (tmp_path / "study.yaml").write_text(STUDY.replace("{type: extremes, points: 4}",
                                                       "{type: montecarlo, samples: 4}"))
    assert studyrun("run", "study.yaml", "--out", "out", site=site, cwd=tmp_path).returncode == 0
    assert not (tmp_path / "out" / "extremes.csv").exists()


def test_a_misspelt_outside_type_is_located_with_a_suggestion(site, tmp_path):
    (tmp_path / "study.yaml").write_text(STUDY.replace("type: extremes", "type: extreme"))
    done = studyrun("validate", "study.yaml", site=site, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("study.yaml:6:12: analysis.type: unknown analysis type "), done.stderr
    assert "did you mean 'extremes'" in done.stderr and len(done.stderr.splitlines()) == 1


def test_the_shipped_checks_pass_on_the_outside_types(site, tmp_path):
    """An outside author's test, as they would write it, run by pytest in its own folder."""
    (tmp_path / "test_extremes.py").write_text(textwrap.dedent("""\
        from studyrun.testing import parametrize_with_checks
        from studyrun_extremes import Extremes, Linear


        @parametrize_with_checks([Extremes, Linear])
        def test_extremes(check, tmp_path):
            check(tmp_path)
        """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", "test_extremes.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "8 passed" in done.stdout, done.stdout[-3000:]


BROKEN = {
    "an import error": ("extremes = no_such_module:Extremes", "",
                        "cannot be loaded (ModuleNotFoundError: No module named "
                        "'no_such_module'); fix or uninstall that package"),
    "a wrong base class": ("thing = broken_types:Thing", """
        from typing import Literal
        from pydantic import BaseModel

        class Thing(BaseModel):
            type: Literal["thing"]
        """, "broken_types.Thing is not a subclass of studyrun.analyses.base.FixedDesignAnalysis or "
             "studyrun.analyses.base.IterativeAnalysis"),
    "a name taken": ("sobol = broken_types:Sobol", """
        from typing import Literal
        from studyrun.analyses.sweep import Sweep

        class Sobol(Sweep):
            type: Literal["sobol"]
        """, "type 'sobol' is studyrun's own already (studyrun.analyses.sobol.Sobol); give it "
             "another name"),
    "a hook left out": ("half = broken_types:Half", """
        from typing import Literal
        from studyrun.analyses.base import FixedDesignAnalysis

        class Half(FixedDesignAnalysis):
            type: Literal["half"]

            def design(self, context, seed):
                return None
        """, "cannot be loaded (TypeError: broken_types.Half (type: half) does not write the "
             "required hook analyse); fix or uninstall that package"),
}


@pytest.mark.parametrize("broken", list(BROKEN))
def test_a_broken_plugin_is_one_line_naming_its_entry_point(broken, tmp_path):
    line, module, message = BROKEN[broken]
    site = tmp_path / "site"
    info = site / "broken_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[studyrun.analyses]\n{line}\n")
    (site / "broken_types.py").write_text(textwrap.dedent(module))
    (tmp_path / "study.yaml").write_text(STUDY.replace("{type: linear, slope: 2}",
                                                       "{type: python, function: m:f}"))
    done = studyrun("validate", "study.yaml", site=site, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"studyrun: entry point {line} (group studyrun.analyses, from broken-plugin 1.0): "
        f"{message}"], done.stderr


def test_a_type_that_leaves_a_hook_unwritten_is_an_error_when_its_class_is_made():
    with pytest.raises(TypeError, match=r"\(type: partial\) does not write the required hook "
                                        "analyse$"):
        class Partial(FixedDesignAnalysis):
            type: Literal["partial"]

            def design(self, context, seed):
                return None
    with pytest.raises(TypeError, match="required hook iterate$"):
        class Search(IterativeAnalysis):
            type: Literal["search"]

            def design(self, context, seed):
                return None
    with pytest.raises(TypeError, match="required hook build$"):
        class Model(ModelSpec):
            type: Literal["model"]
