"""benchmarks/RESULTS.md stays today's figures (issue 56): short, showing
both pictures, and every link of it and of its history/ resolves."""

import re

from conftest import ROOT

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it (lower case, punctuation dropped but
    `-` and `_`, spaces to hyphens)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def broken_links(page) -> list[str]:
    text = page.read_text(encoding="utf-8")
    anchors = {slug(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        if path and not (page.parent / path).exists():
            broken.append(target)
        elif not path and anchor not in anchors:
            broken.append(target)
    return broken


def test_results_is_short_and_shows_both_pictures():
    text = RESULTS.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 400
    for name in ("multi30k_recipe.png", "speed_ratios.png"):
        assert f"](../docs/images/{name})" in text
        assert (ROOT / "docs" / "images" / name).is_file()


def test_every_link_of_results_and_its_history_resolves():
    pages = [RESULTS, *sorted((ROOT / "benchmarks" / "history").glob("*.md"))]
    assert len(pages) > 2
    broken = {page.name: links for page in pages if (links := broken_links(page))}
    assert not broken


def test_the_link_check_sees_a_broken_file_and_a_broken_anchor(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text("## decode_speed\n[a](there.md) [b](gone.md) [c](#decode_speed) "
                    "[d](#gone) [e](https://example.org/x)\n")
    assert broken_links(page) == ["gone.md", "#gone"]
