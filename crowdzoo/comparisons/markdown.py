"""Markdown table text for the comparisons' pages."""
from __future__ import annotations


def cell(text) -> str:
    """A header or cell as Markdown table text: a literal pipe (``|P - P_nuts|``) escaped, so that it
    does not split the cell, and a line break written ``<br>``, so that it does not end the row."""
    return str(text).replace("|", "\\|").replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def markdown_table(frame, right=()) -> str:
    """``frame`` (a pandas DataFrame; its index is left out) as a Markdown pipe table, every header and
    cell escaped by :func:`cell`; the columns named in ``right`` right-aligned (numbers), the others
    left-aligned."""
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cell(c) for c in cols) + " |",
             "|" + "|".join("---:" if c in right else "---" for c in cols) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


#: LaTeX's special characters and what each becomes in text
_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
          "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _split_row(line: str) -> list[str]:
    """The cells of a Markdown table row; an escaped pipe ``\\|`` stays inside its cell."""
    cells, cur, i, body = [], "", 0, line.strip()
    body = body[1:] if body.startswith("|") else body
    body = body[:-1] if body.endswith("|") and not body.endswith("\\|") else body
    while i < len(body):
        if body.startswith("\\|", i):
            cur, i = cur + "|", i + 2
        elif body[i] == "|":
            cells, cur, i = cells + [cur.strip()], "", i + 1
        else:
            cur, i = cur + body[i], i + 1
    return cells + [cur.strip()]


def _latex_cell(text: str) -> str:
    text = text.replace("**", "").replace("<br>", " ")  # a Markdown cell's bold marks and line breaks
    return "".join(_LATEX.get(ch, ch) for ch in text)


def _align(spec: str) -> str:
    spec = spec.strip()
    return "r" if spec.endswith(":") and not spec.startswith(":") else "c" if spec.startswith(":") and \
        spec.endswith(":") else "l"


def latex_tables(markdown: str) -> str:
    """Every Markdown pipe table in ``markdown`` as a LaTeX ``tabular`` (booktabs rules; column
    alignment from the separator row; LaTeX's special characters escaped, an escaped pipe kept as a
    pipe), one after another; the text between tables is left out. What ``crowdzoo compare --out``
    writes beside the Markdown, for a paper."""
    lines, out, i = markdown.splitlines(), [], 0
    while i < len(lines):
        if (lines[i].lstrip().startswith("|") and i + 1 < len(lines)
                and set(lines[i + 1].replace("|", "").replace(":", "").replace("-", "").strip()) == set()
                and "-" in lines[i + 1]):
            head, spec = _split_row(lines[i]), _split_row(lines[i + 1])
            rows, i = [], i + 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(_split_row(lines[i]))
                i += 1
            cols = "".join(_align(s) for s in spec)
            body = [" & ".join(_latex_cell(c) for c in r) + r" \\" for r in rows]
            out.append("\n".join([rf"\begin{{tabular}}{{{cols}}}", r"\toprule",
                                  " & ".join(_latex_cell(c) for c in head) + r" \\", r"\midrule", *body,
                                  r"\bottomrule", r"\end{tabular}"]))
        else:
            i += 1
    return "\n\n".join(out) + ("\n" if out else "")
