"""The safety model is stated once, in ``k8slease/lease/safety.py``, and referred to by number.

Issue 24: it used to be numbered three ways (``lease/rules.py`` 1-8, ``docs/reliability.md``
1-11, bullets in ``jobs/lockrules.py``), so "rule 4" meant two different rules. Now every
"rule N" / "ceiling CN" anywhere in the repository must name a rule the model states.
"""

from __future__ import annotations

import re
from pathlib import Path

from k8slease.lease import safety

ROOT = Path(__file__).resolve().parents[2]
#: "rule 4", "rules 1-3", "rules 4, 5", "rules 2, 3, 5 and 8", "ceiling C2", "ceilings C1-C3"
REFERENCE = re.compile(
    r"\b(?:[Rr]ules? (?P<rules>\d+(?:-\d+)?(?:(?:, | and )\d+)*)"
    r"|[Cc]eilings? (?P<ceilings>C\d(?:-C\d)?))"
)
SOURCES = ("k8slease", "tests", "docs", "benchmarks", "examples", "charts")


def _labels(reference: re.Match[str]) -> list[str]:
    text = reference["rules"] or reference["ceilings"]
    labels: list[str] = []
    for part in re.split(r", | and ", text):
        if "-" in part:
            first, last = part.split("-")
            prefix = "C" if first.startswith("C") else ""
            labels += [
                f"{prefix}{n}" for n in range(int(first.lstrip("C")), int(last.lstrip("C")) + 1)
            ]
        else:
            labels.append(part)
    return labels


def _files() -> list[Path]:
    files = [ROOT / "README.md"]
    for top in SOURCES:
        files += [p for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".md", ".yaml"}]
    return [p for p in files if p != Path(safety.__file__) and p != Path(__file__)]


def test_every_rule_reference_names_a_rule_of_the_model() -> None:
    unknown = [
        f"{path.relative_to(ROOT)}: {match[0]!r}"
        for path in _files()
        for match in REFERENCE.finditer(path.read_text(errors="replace"))
        if not set(_labels(match)) <= set(safety.RULES)
    ]
    assert not unknown, unknown


def test_each_rule_is_stated_in_the_model() -> None:
    text = safety.__doc__ or ""
    for label in safety.RULES:
        marker = f"**{label}.**" if label.startswith("C") else f"\n{label}. **"
        assert marker in text, f"rule {label} is not stated in k8slease/lease/safety.py"


def test_the_model_is_not_stated_again_elsewhere() -> None:
    # a heading of its own, or the numbered statement of a rule, outside the model
    restated = re.compile(r"^Safety model\n-+$|^\d+\. \*\*A holder believes", re.M)
    again = [
        str(p.relative_to(ROOT)) for p in _files() if restated.search(p.read_text(errors="replace"))
    ]
    assert not again, again


def test_the_docs_link_to_the_model() -> None:
    for page in ("docs/reliability.md", "docs/operations.md", "docs/architecture.md"):
        assert "k8slease/lease/safety.py" in (ROOT / page).read_text(), page


def test_the_reference_reader_reads_every_form() -> None:
    found = [
        _labels(m)
        for m in REFERENCE.finditer("rule 4; rules 1-3; rules 2, 3 and 8; ceilings C1-C3")
    ]
    assert found == [["4"], ["1", "2", "3"], ["2", "3", "8"], ["C1", "C2", "C3"]]
