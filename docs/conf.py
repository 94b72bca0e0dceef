"""Sphinx's configuration of the documentation site.

The site's source folder is the repository itself, so that README.md (the
home page), the pages of docs/ and benchmarks/RESULTS.md link each other with
the same relative links that GitHub follows:

    python -m pip install -e ".[docs]"
    sphinx-build -W --keep-going -c docs . build/site      # then open build/site/index.html

`-W` turns every warning into an error: a broken link, a missing anchor or
picture, a page in no table of contents. `.ci/run` builds the site so after
the tests. Why Sphinx with MyST and not MkDocs: docs/architecture.md.
"""

import os

project = "t2t-revival"
extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "README"
# The pages, in the order of the site's navigation (and of the snippet tests,
# tests/readme_workflow.py, which run their code blocks after the README's).
PAGES = ["docs/training", "docs/data", "docs/your-own-data", "docs/decoding",
         "docs/serving", "docs/insights", "docs/parsing", "docs/reproducing", "docs/tensor2tensor",
         "docs/pretrained",
         "docs/troubleshooting", "docs/benchmarks", "docs/architecture",
         "benchmarks/RESULTS"]
_HISTORY = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "history")
include_patterns = ["README.md", "docs/*.md", "docs/images/*", "benchmarks/RESULTS.md",
                    "benchmarks/history/*.md"]
# Folders not walked at all (a virtualenv, data, runs, the build itself).
exclude_patterns = [".*", "build", "dist", "t2t_data", "t2t_train", "tests", "benchmarks/runs"]
# Anchors for headings down to ####, as GitHub makes them ([...](page.md#a-heading)).
myst_heading_anchors = 4
# Code blocks without a language are shell commands or plain text: not highlighted.
highlight_language = "none"
# The benchmark journal (benchmarks/RESULTS.md and its history) skips heading
# levels; that is style, not a broken link.
suppress_warnings = ["myst.header"]
html_theme = "furo"
html_title = "t2t-revival"
html_show_copyright = False   # (no copyright holder to name; the license is Apache-2.0)


def _navigation(app, docname, source):
    """The site's table of contents, added to the home page's source as it is
    read (README.md itself stays plain Markdown on GitHub)."""
    if docname != root_doc:
        return
    entries = list(PAGES)
    if os.path.isdir(_HISTORY):
        entries.append("benchmarks/history/*")
    source[0] += ("\n\n```{toctree}\n:hidden:\n:glob:\n\n" + "\n".join(entries) + "\n```\n")


def _index_page(app, exception):
    """index.html, where a browser or a host looks first: the home page is
    README.html (the root document keeps the README's name)."""
    if exception is None and app.builder.format == "html":
        with open(os.path.join(app.outdir, "index.html"), "w", encoding="utf-8") as f:
            f.write('<!DOCTYPE html><meta charset="utf-8"><title>t2t-revival</title>'
                    '<meta http-equiv="refresh" content="0; url=README.html">'
                    '<a href="README.html">t2t-revival</a>\n')


def setup(app):
    app.connect("source-read", _navigation)
    app.connect("build-finished", _index_page)
