"""Markdown table text for the comparisons' pages."""
from __future__ import annotations


def cell(text) -> str:
    """A header or cell as Markdown table text: a literal pipe (``|P - P_nuts|``) escaped, so that it
    does not split the cell."""
    return str(text).replace("|", "\\|")
