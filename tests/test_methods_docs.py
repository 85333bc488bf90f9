"""docs/methods.md and the README state the conventions studyrun follows (issue 13, section 7)."""

from __future__ import annotations

from conftest import REPO


def test_the_methods_document_states_each_convention():
    text = (REPO / "docs" / "methods.md").read_text()
    for section in ("## The cost of a model against data (FME's modCost)",
                    "## Summaries of sensitivity functions (FME's sensFun summary)",
                    "## Derivative-based global sensitivity measures (DGSM)",
                    "## Gradient matching"):
        assert section in text
    for statement in (
            "**`scale_var: true`: studyrun divides each variable's SSR by N_j, once.**",
            "| SSR_j / N_j^3 |", "SSR_j / N_j^2 |",  # FME's code, FME's paper
            "does not change that fit at all",  # FME's Marquardt fit ignores scaleVar
            "L2 = sqrt((1/N) sum_k S~(t_k)^2)", "since version 1.3.6.1",
            "nu_i = E[(dg/dx_i)^2]", "ST_i <= dgsm_i = C_i nu_i / V",
            "| uniform, bounds [a, b] | (b - a)^2 / pi^2 |", "| normal (sigma) | sigma^2 |",
            "F(p) = sum_i sum_k ((f_i(x~(t_k), p, t_k) - dx~_i/dt(t_k)) / s_i)^2",
            "(a sum, not a mean)", "from the smoothed data at the model's start"):
        assert statement in text, statement
    assert text.count("References:") == 4


def test_the_readme_says_which_fme_convention_and_no_longer_claims_exactly():
    text = (REPO / "README.md").read_text()
    assert "modCost exactly" not in text
    assert "summary divides sqrt(sum S^2) by N instead" not in text
    assert "divided by its N once" in text and "divides by N^3" in text
    assert "since version 1.3.6.1" in text
