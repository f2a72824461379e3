"""Clause catalogues and errata: complete, consistent with each other, and the generated
docs/clauses/*.md current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.protocols import PROTOCOLS, catalogue
from harness.protocols.clauses import Level

ERRATA = Path("docs/errata.md").read_text()
ERRATA_IDS = re.findall(r"^### (E-[A-Z]+-\d+):", ERRATA, re.M)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_catalogue_has_every_level_it_should(protocol: str) -> None:
    cat = catalogue(protocol)
    assert len(cat) >= 25
    assert any(c.level is Level.MUST for c in cat)
    assert all(c.section and c.text for c in cat)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_errata_referenced_by_clauses_exist(protocol: str) -> None:
    missing = sorted({c.errata for c in catalogue(protocol) if c.errata and c.errata not in ERRATA_IDS})
    assert not missing, f"{protocol} clauses cite errata that docs/errata.md lacks: {missing}"


def test_errata_ids_are_unique_and_cover_at_least_four_documents() -> None:
    assert len(ERRATA_IDS) == len(set(ERRATA_IDS))
    assert {i.split("-")[1] for i in ERRATA_IDS} >= {"DAFKA", "DCP", "EVENTBUS", "PPPP", "RAFT"}
    for eid in ERRATA_IDS:  # every entry states a decision
        body = ERRATA.split(f"### {eid}:", 1)[1].split("\n### ", 1)[0]
        assert "**Decision" in body or "Decision:" in body, f"{eid} has no decision"


def test_clause_ids_cited_in_errata_exist() -> None:
    ids = set(re.findall(r"`((?:dafka|dcp|eventbus|pppp|raft)\.[a-z0-9-]+\.[a-z0-9.-]*[a-z0-9])`", ERRATA))
    known = {c.id for p in PROTOCOLS for c in catalogue(p)}
    assert not sorted(ids - known), f"errata cite unknown clause ids: {sorted(ids - known)[:10]}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_generated_clause_docs_are_current(protocol: str) -> None:
    assert Path(f"docs/clauses/{protocol}.md").read_text() == catalogue(protocol).render_markdown(), \
        "run `zmq-harness clauses --write`"
