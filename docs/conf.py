"""Sphinx configuration: Markdown pages (myst-parser), the CLI reference generated from the
commands' argparse parsers (sphinx-argparse), the harness's API from its docstrings (autodoc).

Build: `sphinx-build -W -b html docs docs/_build/html` (tests/test_docs.py does it)."""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))
sys.path.insert(0, os.path.abspath("."))  # cli_parsers.py

project = "gluonperf"
author = "the gluonperf developers"
copyright = "2026, " + author

extensions = ["myst_parser", "sphinxarg.ext", "sphinx.ext.autodoc", "sphinx.ext.napoleon"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build", "examples/*.md"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "none"

html_theme = "alabaster"
# The examples print wide tables: the page takes the window's width and the body no maximum,
# so a code block shows a whole table instead of a narrow column with a scroll bar.
html_theme_options = {"page_width": "96%", "body_max_width": "none", "sidebar_width": "240px"}
html_static_path = []
html_title = "gluonperf"


def _literal_blocks(app, what, name, obj, options, lines):
    """The package's docstrings show code as an indented block after a blank line, as plain
    text reads it; reStructuredText needs `::` before it to show it as code."""
    out = []
    for i, line in enumerate(lines):
        starts_block = (line.startswith("    ") and i > 0 and not lines[i - 1].strip()
                        and (i < 2 or not lines[i - 2].startswith(" "))
                        and (i < 2 or not lines[i - 2].rstrip().endswith("::")))
        if starts_block:
            out += ["::", ""]
        out.append(line)
    lines[:] = out


def setup(app):
    app.connect("autodoc-process-docstring", _literal_blocks)
