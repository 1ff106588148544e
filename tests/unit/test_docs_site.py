"""The docs site's structure: every old page address the redirects keep answers with a
page that exists, no redirect hides a real page, the README's links into docs/ reach a
page, and the home page's flow is a diagram the theme draws (not text art in a box)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"


class _Loader(yaml.SafeLoader):
    """mkdocs.yml names Python objects (``!!python/name:``); only their place matters here."""


_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: suffix)
CONFIG = yaml.load((REPO / "mkdocs.yml").read_text(), Loader=_Loader)


def _nav_pages(entries: list) -> set[str]:
    pages: set[str] = set()
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages |= _nav_pages(value) if isinstance(value, list) else {value}
    return pages


NAV = _nav_pages(CONFIG["nav"])
[REDIRECTS] = [
    p["redirects"]["redirect_maps"]
    for p in CONFIG["plugins"]
    if isinstance(p, dict) and "redirects" in p
]


def test_the_nav_has_the_sections_as_tabs():
    assert "navigation.tabs" in CONFIG["theme"]["features"]
    sections = [next(iter(entry)) for entry in CONFIG["nav"]]
    assert sections == [
        "Get started",
        "Clients",
        "Routing",
        "Consumers",
        "Operate",
        "Deploy",
        "Reference",
        "Contributing",
    ]


def test_only_the_home_page_and_pages_others_own_stay_in_the_root_of_docs():
    # clients/, consumers/, … hold the pages; spark-conformance.md keeps its path
    # (the Spark conformance tests read it there).
    assert sorted(p.name for p in DOCS.glob("*.md")) == ["index.md", "spark-conformance.md"]


def test_every_redirect_leads_to_a_page_of_the_nav_and_hides_no_page():
    assert len(REDIRECTS) >= 19
    for old, new in REDIRECTS.items():
        assert not (DOCS / old).exists(), f"{old} is a page; a redirect would replace it"
        assert new in NAV, f"{old} redirects to {new}, which the nav does not list"


def test_the_readmes_links_into_docs_reach_a_page():
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\(docs/([^)#\s]+)", readme)
    assert len(links) >= 20
    missing = sorted({link for link in links if not (DOCS / link).exists()})
    assert not missing, f"README.md links to pages that are gone: {missing}"


def test_the_home_page_flow_is_a_mermaid_diagram_with_the_spool():
    fences = CONFIG["markdown_extensions"]
    [superfences] = [
        f["pymdownx.superfences"]
        for f in fences
        if isinstance(f, dict) and "pymdownx.superfences" in f
    ]
    assert {"name": "mermaid", "class": "mermaid"}.items() <= superfences["custom_fences"][
        0
    ].items()
    home = (DOCS / "index.md").read_text()
    [diagram] = re.findall(r"^```mermaid\n(.*?)^```$", home, re.M | re.S)
    assert re.search(r"^\s*spool\[", diagram, re.M), "the spool is a node of the flow"
    assert re.search(r"route -\..*\.-> spool", diagram), "the route falls back to the spool"
    assert re.search(r"spool -\..*\.-> kafka", diagram), "the spool drains into Kafka"
    assert "```text" not in home, "no text drawing left on the home page"
