"""The documentation's own links: every relative link in README.md and docs/*.md names a file
or folder of the repository (a page moved or renamed leaves none dangling)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(page.read_text(encoding="utf-8"))
            if not t.startswith(("http://", "https://", "mailto:", "#"))]


def test_relative_links_finds_links_and_skips_urls():
    text = "see [a](docs/a.md#x) and [b](https://x.org) and [c](#top)"
    assert [t for t in LINK.findall(text) if not t.startswith(("https://", "#"))] == \
        ["docs/a.md#x"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    missing = [t for t in relative_links(page)
               if not (page.parent / t.split("#")[0]).exists()]
    assert missing == []


def test_the_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    unlisted = [p.name for p in PAGES[1:] if p.name != "README.md" and f"({p.name})" not in index]
    assert unlisted == []


def readme_block(heading: str, language: str) -> str:
    """The first ```language block after `heading` in README.md."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text[text.index(heading):]
    start = after.index(f"```{language}\n") + len(language) + 4
    return after[start:after.index("```", start)]


@pytest.mark.slow
def test_the_readmes_simulator_example_runs_as_written(tmp_path):
    """The README's 30-second simulator example, its commands run as written (after the
    virtual environment's activation) and its Python snippet after them."""
    import subprocess
    import sys

    commands = [line.split("#")[0].split() for line in
                readme_block("## Simulate in 30 seconds", "bash").splitlines()
                if line.startswith("andreas ")]
    assert [c[1] for c in commands] == ["generate", "simulate", "account", "compare"]
    for argv in commands:
        run = subprocess.run([sys.executable, "-m", "andreas", *argv[1:]], cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, (argv, run.stderr)
    assert (tmp_path / "run1" / "segments.csv").exists() and (tmp_path / "cmp").exists()
    run = subprocess.run([sys.executable, "-c", readme_block("## Simulate in 30 seconds",
                                                             "python")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and float(run.stdout) > 0, run.stderr


@pytest.mark.parametrize("page", PAGES[1:], ids=lambda p: p.name)
def test_every_docs_page_reads_in_one_sitting(page):
    """Documentation in layers (issue 47): each page of docs/ stays under ~15 KB; a page that
    grows past it is split by topic, with the index (docs/README.md) listing the parts."""
    assert len(page.read_text(encoding="utf-8")) <= 16_000, page.name


def test_the_readme_fits_a_screen_or_two():
    assert len((ROOT / "README.md").read_text(encoding="utf-8")) <= 10_500
