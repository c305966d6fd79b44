"""Regenerate the README's configuration table from :data:`obs.settings.SETTINGS`.

``make docs`` runs it; ``tests/test_settings.py`` fails when the README is out of date.
"""

from __future__ import annotations

import sys
from pathlib import Path

from obs.settings import markdown_rows

README = Path(__file__).resolve().parents[1] / "README.md"
BEGIN = "<!-- settings table: generated from obs.settings.SETTINGS by `make docs` -->"
END = "<!-- end of settings table -->"
HEADER = "| variable | meaning |\n|---|---|"


def render(readme: str) -> str:
    """``readme`` with the text between the two markers replaced by the generated table."""
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    table = "\n".join([HEADER, *markdown_rows()])
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def main() -> int:
    """Rewrite README.md in place; exit 0."""
    README.write_text(render(README.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
