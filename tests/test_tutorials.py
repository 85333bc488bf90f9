"""The tutorials (docs/tutorials/, filled in by docs/hooks.py from running their examples): one
per analysis type, and a page that cannot show a number or a claim its example's run lacks."""

from __future__ import annotations

import importlib.util

import pytest
import yaml
from conftest import REPO, run_example


def docs_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", REPO / "docs" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_analysis_type_has_a_tutorial_on_an_example_of_its_type():
    hooks = docs_hooks()
    nav = str(hooks.on_config({"nav": [{"Guide": []}]})["nav"])
    pages = hooks.tutorials()
    assert set(pages) >= {"montecarlo", "sweep", "sobol", "morris", "fast", "rbd_fast", "delta",
                          "pawn", "dgsm", "doe", "surrogate", "local", "gradient", "calibrate",
                          "optimize"}
    for kind, page in pages.items():
        meta, text = hooks.tutorial_text(page)
        study = yaml.safe_load((REPO / "studies" / f"{meta['example']}.yaml").read_text())
        assert study["analysis"]["type"] == kind, page
        assert f"tutorials/{page}.md" in nav, f"the nav lacks the tutorial {page}"
        # for users: the question, the run and what comes back, the methods linked
        assert "{{ study() }}" in text and "{{ run() }}" in text and "../methods.md#" in text, page
        assert "studyrun/" not in text and "docs/methods.md" not in text, page


@pytest.mark.slow
def test_a_page_shows_its_examples_numbers_and_refuses_what_the_run_does_not_bear_out(tmp_path):
    hooks = docs_hooks()
    analysis = run_example(tmp_path, "ishigami-montecarlo").analysis
    run = {"example": "ishigami-montecarlo", "analysis": analysis, "said": [],
           "closing": "ishigami-montecarlo: ...", "figures": {"hist-y": ("Distribution of y", b"")}}
    _, text = hooks.tutorial_text("montecarlo")
    text = text.replace("{{ figures() }}", "{{ figure('hist-y') }}")
    page = hooks.tutorial_page("montecarlo", text, run)
    y = analysis["results"]["y"]
    assert f"| {y['n']} | {y['mean']:.4g} | {y['std']:.4g} |" in page
    assert "![Distribution of y](figures/ishigami-montecarlo/hist-y.svg)" in page
    assert "```yaml title=\"studies/ishigami-montecarlo.yaml\"" in page
    # a key the run's analysis.json does not hold, a claim it does not bear out, a figure its
    # report does not draw: each stops the build, naming the page
    for wrong in ("{{ results.y.median | num }}", "{{ expect(results.y.mean > 4, 'mean > 4') }}",
                  "{{ figure('sobol-y') }}"):
        with pytest.raises(hooks.PluginError, match="docs/tutorials/montecarlo.md"):
            hooks.tutorial_page("montecarlo", text + wrong, run)
