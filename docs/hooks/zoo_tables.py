"""mkdocs hook: the pages' tables of the zoo's models, written from :data:`crowdzoo.zoo.ZOO` when the
site is built, so that a model added to the table joins the docs with no page edited.

``<!-- zoo: route table -->`` becomes :func:`crowdzoo.zoo.route_table` (docs/design.md) and
``<!-- zoo: model modules -->`` a section per model with the API of every module of its package
(docs/api/models.md): the modules its entry names (model, posterior, own routes, guide, example),
then the package's other modules that no other entry names.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the crowdzoo of this checkout, as mkdocstrings reads it

from crowdzoo import zoo  # noqa: E402

ROUTE_TABLE = "<!-- zoo: route table -->"
MODEL_MODULES = "<!-- zoo: model modules -->"


def _package_modules(package: str) -> list:
    """The public modules of ``package`` (a package of crowdzoo), from its folder."""
    folder = ROOT.joinpath(*package.split("."))
    return [f"{package}.{p.stem}" for p in sorted(folder.glob("*.py")) if not p.stem.startswith("_")]


def model_modules(entries=None) -> dict:
    """{entry name: [module, ...]} of crowdzoo's models: each module under the first entry naming it."""
    entries = [e for e in (zoo.ZOO if entries is None else entries) if e.model.startswith("crowdzoo.")]
    named = {}
    for e in entries:
        named[e.name] = [p.partition(":")[0] for p in e.paths() if p not in zoo.GENERIC]
    claimed = {m for mods in named.values() for m in mods}
    out, seen = {}, set()
    for e in entries:
        package = e.model.partition(":")[0].rpartition(".")[0]
        mods = named[e.name] + [m for m in _package_modules(package) if m not in claimed]
        out[e.name] = [m for m in dict.fromkeys(mods) if not (m in seen or seen.add(m))]
    return out


def api_sections() -> str:
    modules = model_modules()
    parts = []
    for e in zoo.ZOO:
        if e.name in modules:
            parts.append(f"## {e.model.rpartition(':')[2]} (`{e.name}`)\n\n{e.summary}.\n\n"
                         + "".join(f"::: {m}\n\n" for m in modules[e.name]))
    return "".join(parts)


def on_page_markdown(markdown: str, page=None, config=None, files=None, **kwargs) -> str:
    if ROUTE_TABLE in markdown:
        markdown = markdown.replace(ROUTE_TABLE, zoo.route_table())
    if MODEL_MODULES in markdown:
        markdown = markdown.replace(MODEL_MODULES, api_sections())
    return markdown
