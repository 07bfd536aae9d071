"""``bench-retrieval --scoped``: each single-document query asked as a person asks it inside that
document, without the cues that name it. Pure: no Django, no database.

The benchmarks' questions carry their document's name because they are asked of a whole corpus:
every CUAD query ends with its contract's title in brackets ("... (Reseller Agreement between
McDATA CORPORATION and RESELLER)"), and DragonBall's open with "According to the judgment of
Greenfield, Fairview, Court," or "Based on Energen Solutions Ltd's 2019 financial report," and
name the company, the defendant or the patient. Someone typing into a document page's question
box says none of that. ``scoped_query`` takes it out:

- the opening source clause (``retrieval.routing.source_clause``) when it cites the source
  (a report, judgment, record, "the outline"); a clause that carries the question's own subject
  ("Based on the ethics and integrity incidents reported in January 2020, how did ...") stays;
- the contract's title, with the brackets it sat in (``retrieval.routing.take_out_titles``);
- the document's name elsewhere, replaced by what one says inside it: the company
  (``company_name``, also without its "Inc." / "Ltd."), the defendant of a judgment, the patient
  of a hospital record (``document_names`` finds them in the document), any court or hospital
  ("Glenwood, Quailwood, Court" -> "the court"); "X's" and "X'" become "the company's";
- the first letter capitalised again.

Other people a question names (a victim, a defence lawyer) stay: they are what it asks about.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.routing import source_clause, take_out_titles

COMPANY, DEFENDANT, PATIENT, COURT, HOSPITAL = (
    "the company",
    "the defendant",
    "the patient",
    "the court",
    "the hospital",
)
# The clause cites the source itself, not the question's subject.
_CITES_SOURCE = re.compile(r"\b(?:report|judgment|records?|outline|information provided)\b", re.IGNORECASE)
_PERSON = r"[A-Z]\.\s?[A-Z][A-Za-z-]+"
# DragonBall's courts ("Glenwood, Quailwood, Court", "Trenton Eastwood Court") and hospitals.
_COURT = re.compile(r"\b[A-Z][a-z]+,?\s+[A-Z][a-z]+,?\s+Court\b")
_HOSPITAL = re.compile(r"\b[A-Z][a-z]+(?:\s+(?:General|City))?\s+(?:Hospital|Medical Center)\b")
# A contract's title in brackets at the end: "(Reseller Agreement between A and B)", brackets inside.
_CONTRACT_TITLE = re.compile(r"\s*\((?:[^()]|\([^()]*\))*\bbetween\b(?:[^()]|\([^()]*\))*\)\s*$")
_LEGAL_SUFFIX = r",?\s+(?:Inc|Ltd|Co|Corp|LLC|Limited|PLC)"  # "Acme Ltd." is Acme's full name
_POSSESSIVE = r"(?P<possessive>'s\b|’s\b|'(?=\s)|’(?=\s))?"


@dataclass(frozen=True, slots=True)
class Name:
    """A name a query may call its document by, and what is said instead inside it ("" for a
    title that is taken out with its brackets)."""

    text: str
    stand_in: str


def document_names(*, domain: str, title: str, content: str) -> list[Name]:
    """The names of one document that its questions use: a contract's title (taken out), a
    company's name (also without its legal suffix), a judgment's defendant, a record's patient."""
    if domain == "Contracts":
        return [Name(title, "")] if title else []
    if domain == "Finance":
        return _company_names(title)
    if domain not in _PRINCIPALS:
        return []
    role, stand_in = _PRINCIPALS[domain]
    person = principal_person(content, role)
    return [Name(person, stand_in)] if person else []


# The person a document of the domain is about: the label before their name, and what a query
# asked inside the document says instead.
_PRINCIPALS = {"Law": ("Defendant", DEFENDANT), "Medical": ("Name", PATIENT)}


def _company_names(title: str) -> list[Name]:
    """A company's name, and the same without its legal suffix ("Acme Mining Ltd." -> "Acme Mining")."""
    if not title:
        return []
    names = [Name(title, COMPANY)]
    short = re.sub(rf"{_LEGAL_SUFFIX}\.?$", "", title)
    if short != title and short.strip():
        names.append(Name(short, COMPANY))
    return names


def principal_person(content: str, role: str) -> str | None:
    """The person a judgment or a record is about, as its questions write them ("J. Thompson"):
    the first initial-and-surname after ``role`` ("Defendant:", "Name:"), or a full name before
    ", Defendant" ("JAMES THOMPSON, Defendant")."""
    full = re.search(rf"\b([A-Z][A-Za-z]+)\s+([A-Z][A-Za-z'-]+),\s+{role}\b", content)
    if full is not None:
        return f"{full[1][0]}. {full[2].title()}"
    at = re.search(rf"\b{role}\b", content)
    if at is None:
        return None
    person = re.compile(_PERSON).search(content, at.end(), at.end() + 300)
    return person[0] if person is not None else None


def scoped_query(query: str, names: Sequence[Name]) -> str:
    """``query`` as asked inside its document: without the source clause that cites it, without
    its title, its names replaced (see the module docstring)."""
    text = " ".join(query.split())
    clause, rest = source_clause(text)
    if clause and _CITES_SOURCE.search(clause):
        text = rest
    titles = [" ".join(name.text.split()) for name in names if not name.stand_in]
    if titles:
        text, _ = take_out_titles(text, titles)
        text = _CONTRACT_TITLE.sub("", text)  # a title written otherwise than the document's
    for name in sorted((name for name in names if name.stand_in), key=lambda name: -len(name.text)):
        # "Green Fields Agriculture" is not the start of "Green Fields Agriculture Co.", a namesake
        pattern = re.escape(name.text).replace(r"\ ", r"\s+") + rf"(?!{_LEGAL_SUFFIX}\b)"
        text = _replace(text, pattern, name.stand_in)
    text = _replace(text, _COURT.pattern, COURT)
    text = _replace(text, _HOSPITAL.pattern, HOSPITAL)
    text = " ".join(text.split())
    return text[:1].upper() + text[1:]


def _replace(text: str, pattern: str, stand_in: str) -> str:
    """Every ``pattern`` replaced by ``stand_in``, a possessive kept as "'s" ("Acme's", "Acme'")."""
    return re.sub(
        rf"(?<![\w.]){pattern}(?!\w){_POSSESSIVE}",
        lambda found: stand_in + ("'s" if found["possessive"] else ""),
        text,
    )
