"""Regenerate the mapping table of ``docs/metrics.md`` from the catalog.

Run ``python -m platform_streams.metrics.docs [path]`` after changing
:data:`~platform_streams.metrics.catalog.CATALOG`; a unit test fails while the document
and the catalog disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from platform_streams.metrics.catalog import mapping_table

__all__ = ["BEGIN", "END", "update"]

BEGIN = "<!-- mapping:begin -->\n"
END = "<!-- mapping:end -->"


def update(path: Path) -> bool:
    """Rewrite the table between the markers; True if the file changed."""
    text = path.read_text(encoding="utf-8")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    new = f"{head}{BEGIN}{mapping_table()}{END}{tail}"
    if new == text:
        return False
    path.write_text(new, encoding="utf-8")
    return True


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/metrics.md")
    print(f"{target}: {'updated' if update(target) else 'up to date'}")
