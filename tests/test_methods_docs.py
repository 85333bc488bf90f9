"""docs/methods.md and the guide state the conventions studyrun follows (issue 13, section 7),
and every section the code names in docs/methods.md exists."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

DOC = REPO / "docs" / "methods.md"
SCANNED = ("studyrun", "tests", "docs", "README.md")
# a reference to the document; what follows it says whether (and how) it names a section
REFERENCE = re.compile(r"methods\.md")
QUOTED = re.compile(r',\s*"[^"]+"(?:,?\s*(?:and\s+)?"[^"]+")*')  # one heading or a list of them
UNQUOTED = re.compile(r"(,|\s+sections?\b|\s*§)")


def headings(text: str) -> list[str]:
    return re.findall(r"(?m)^## (.+?)\s*$", text)


def names_of(heading: str) -> set[str]:
    """A heading answers to its full text and to its text without a trailing parenthesis."""
    return {heading, re.sub(r"\s*\([^()]*\)$", "", heading)}


def dangling(source: str, text: str, known: list[str]) -> list[str]:
    """The references in `text` that name a section docs/methods.md does not have; one that
    names a section without quoting its heading (`section 4`, `, DGSM`) counts as dangling."""
    names = set().union(*(names_of(h) for h in known))
    flat = re.sub(r"\s+", " ", re.sub(r"\n\s*#", " ", text))  # docstrings and comments rewrapped
    found = []
    for match in REFERENCE.finditer(flat):
        rest = flat[match.end():match.end() + 200]
        quoted = QUOTED.match(rest)
        if quoted:
            found += [f"{source}: no heading {name!r}"
                      for name in re.findall(r'"([^"]+)"', quoted.group()) if name not in names]
        elif UNQUOTED.match(rest):
            found.append(f"{source}: {flat[match.start():match.end() + 40]!r} names a section "
                         "without quoting its heading")
    return found


def references(text: str) -> list[str]:
    """The headings the references in `text` name."""
    flat = re.sub(r"\s+", " ", re.sub(r"\n\s*#", " ", text))
    return [name for match in REFERENCE.finditer(flat)
            for quoted in [QUOTED.match(flat, match.end())] if quoted
            for name in re.findall(r'"([^"]+)"', quoted.group())]


def project_files():
    """The files that may refer to docs/methods.md; not this one, whose bad examples are meant."""
    for name in SCANNED:
        path = REPO / name
        found = [path] if path.is_file() else [*sorted(path.rglob("*.py")),
                                                *sorted(path.rglob("*.md"))]
        yield from (p for p in found if p.resolve() != Path(__file__).resolve())


def test_the_methods_document_states_each_convention():
    text = DOC.read_text()
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


def test_every_method_has_its_section_with_formulas_notes_and_references():
    text = DOC.read_text()
    found = headings(text)
    assert len(found) == len(set(found)), "a heading appears twice"
    for heading in ("Sobol' indices", "Morris elementary effects", "Extended FAST (eFAST)",
                    "RBD-FAST", "Delta moment-independent indices", "PAWN",
                    "Local sensitivity functions (FME's sensFun)",
                    "Collinearity and identifiable subsets (FME's collin)",
                    "Reduced-partition sensitivity coefficients", "Agreement of two rankings",
                    "Adjoint gradients",
                    "Calibration fits (FME's modFit)", "Bayesian calibration (FME's modMCMC)",
                    "Optimisation", "Monte Carlo summaries", "Parameter sweeps",
                    "Designed experiments and fractional factorials", "Response surfaces",
                    "Surrogate models",
                    "Equation models: integration methods", "Stock-and-flow models"):
        assert heading in found, heading
    for section in re.split(r"(?m)^## ", text)[1:]:
        title = section.splitlines()[0]
        assert section.count("\nReferences: ") == 1, f"{title}: one References paragraph"
        assert "As studyrun computes it" in section or "studyrun/" in section, title
    assert "/work/" not in text and "shared/design" not in text  # nothing outside the project


def test_every_section_the_code_names_is_a_heading_of_the_document():
    known = headings(DOC.read_text())
    problems, named = [], []
    for path in project_files():
        text = path.read_text(encoding="utf-8")
        problems += dangling(str(path.relative_to(REPO)), text, known)
        named += references(text)
    assert not problems, "\n".join(problems)
    assert len(set(named)) >= 15  # the code does name its sections: this test checks something


def test_a_dangling_reference_is_caught():
    known = ["The cost of a model against data (FME's modCost)", "Gradient matching"]
    good = ('"""As docs/methods.md, "The cost of a model against data" and\n'
            '    "Gradient matching" say; see docs/methods.md."""')
    assert dangling("good.py", good, known) == []
    assert references(good) == ["The cost of a model against data", "Gradient matching"]
    wrapped = '# docs/methods.md, "The cost of a model\n# against data (FME\'s modCost)"'
    assert dangling("wrapped.py", wrapped, known) == []
    for bad in ('docs/methods.md, "Gradient matching methods"', "methods.md section 4",
                "docs/methods.md, DGSM.", 'docs/methods.md, "Gradient matching" and "Costs"'):
        assert len(dangling("bad.py", bad, known)) == 1, bad


def test_the_guide_says_which_fme_convention_and_no_longer_claims_exactly():
    """The README's sections on calibration and design choices moved to these pages."""
    text = "\n".join((REPO / "docs" / page).read_text()
                     for page in ("guide/calibration-optimization.md", "design-choices.md"))
    assert "modCost exactly" not in text
    assert "summary divides sqrt(sum S^2) by N instead" not in text
    assert "divided by its N once" in text and "divides by N^3" in text
    assert "since version 1.3.6.1" in text
