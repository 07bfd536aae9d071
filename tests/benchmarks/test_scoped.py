"""``bench-retrieval --scoped``'s rewriting: real DragonBall and CUAD queries asked inside their own
document, without the names and clauses that point at it."""

from __future__ import annotations

import pytest

from fable_benchmarks.scoped import Name, document_names, principal_person, scoped_query

# Openings of real documents, as docs_en.jsonl and docs.jsonl hold them.
JUDGMENT = (
    "### Brighton, Sterling Court \n\n#### Criminal Judgment\n\n**Court and Prosecutor Information:**\n\n"
    "**Court:** Brighton, Sterling Court\\\n**Clerk:** Y. Scott\n\n**Defendant and Defense Lawyer "
    "Information:**\n\n**Defendant:**\n- **Name:** N. Adams\n- **Gender:** Male\n"
)
JUDGMENT_FULL_NAME = (
    "---\n**IN THE QUARRYVILLE, YORKTOWN, COURT**\n\n**THE PEOPLE OF THE STATE OF YORKTOWN,**\n\n**v.**\n\n"
    "**JAMES THOMPSON, Defendant.**\n\n**CRIMINAL JUDGMENT**\n"
)
RECORD = "Hospitalization Record:\n\nBasic Information:\nName: E. Cruz\nGender: Male\nAge: 27\n"
CONTRACT_TITLE = "Reseller Agreement between McDATA CORPORATION and RESELLER"

ENERGEN = document_names(domain="Finance", title="Energen Solutions Ltd", content="")
CULTURE = document_names(domain="Finance", title="Culture Innovators Ltd.", content="")
INNOVA = document_names(domain="Finance", title="InnovaTech Solutions", content="")
NATIONAL = document_names(domain="Finance", title="National Development Corporation", content="")
COURT_DOC = document_names(domain="Law", title="111", content=JUDGMENT)
THOMPSON = document_names(domain="Law", title="110", content=JUDGMENT_FULL_NAME)
HALL = [Name("J. Hall", "the defendant")]
PATIENT = document_names(domain="Medical", title="200", content=RECORD)
CONTRACT = document_names(domain="Contracts", title=CONTRACT_TITLE, content="")


@pytest.mark.parametrize(
    ("query", "names", "expected"),
    [
        # DragonBall: the source clause that cites the report goes, the company's name becomes "the company".
        (
            "Based on Energen Solutions Ltd's 2019 financial report, summarize the strategic initiatives "
            "undertaken by the company in 2019.",
            ENERGEN,
            "Summarize the strategic initiatives undertaken by the company in 2019.",
        ),
        ("Based on the outline, summarize the company's governance improvement plans.", ENERGEN,
         "Summarize the company's governance improvement plans."),
        (
            "How did InnovaTech Solutions' sustainability and social responsibility initiatives in April 2017 "
            "enhance its market competitiveness?",
            INNOVA,
            "How did the company's sustainability and social responsibility initiatives in April 2017 enhance "
            "its market competitiveness?",
        ),
        (
            "How did the Art Explorer program, which provided interactive educational programs, contribute to "
            "Culture Innovators Ltd.'s diversified revenue streams and strengthened brand image?",
            CULTURE,
            "How did the Art Explorer program, which provided interactive educational programs, contribute to "
            "the company's diversified revenue streams and strengthened brand image?",
        ),
        (
            "How did the compliance and regulatory updates implemented in July 2019 help protect National "
            "Development Corporation and its shareholder interests?",
            NATIONAL,
            "How did the compliance and regulatory updates implemented in July 2019 help protect the company "
            "and its shareholder interests?",
        ),
        # A clause that carries the question's own subject stays; only the name in it changes.
        (
            "Based on the ethics and integrity incidents reported in January 2020, how did Energen Solutions "
            "Ltd enhance its credibility?",
            ENERGEN,
            "Based on the ethics and integrity incidents reported in January 2020, how did the company enhance "
            "its credibility?",
        ),
        # A judgment's court and defendant; other people it names stay.
        (
            "According to the judgment of Brighton, Sterling Court, summarize the facts of N. Adams' crimes.",
            COURT_DOC,
            "Summarize the facts of the defendant's crimes.",
        ),
        (
            "According to the court judgment of Quarryville, Yorktown, Court, what was the crime committed by "
            "J. Thompson?",
            THOMPSON,
            "What was the crime committed by the defendant?",
        ),
        (
            "According to the judgment of Urbana, Belmont, Court, what was the time period when J. Hall "
            "followed R. Johnson to his residence?",
            HALL,
            "What was the time period when the defendant followed R. Johnson to his residence?",
        ),
        ("Who presided over the case at Glenwood, Quailwood, Court?", HALL, "Who presided over the case at the court?"),
        # A hospital record's patient.
        (
            "According to the hospitalization records of Parker City Hospital, what is E. Cruz's initial "
            "diagnosis?",
            PATIENT,
            "What is the patient's initial diagnosis?",
        ),
        (
            "According to the hospitalization records of Parker City Hospital, summarize the present illness "
            "of E. Cruz.",
            PATIENT,
            "Summarize the present illness of the patient.",
        ),
        # CUAD: the contract's title at the end goes with its brackets.
        (
            "Is consent or notice required of a party if the contract is assigned to a third party? "
            f"({CONTRACT_TITLE})",
            CONTRACT,
            "Is consent or notice required of a party if the contract is assigned to a third party?",
        ),
        (
            "Which state/country's law governs the interpretation of the contract? (Strategic Alliance "
            'Agreement between AURA  SYSTEMS INC. and (collectively the "Parties"))',
            document_names(
                domain="Contracts",
                title='Strategic Alliance Agreement between AURA  SYSTEMS INC. and (collectively the "Parties")',
                content="",
            ),
            "Which state/country's law governs the interpretation of the contract?",
        ),
        # A title written otherwise than the document's still goes.
        (
            "Does the contract contain a license granted by one party to its counterparty? (Co-Branding "
            "Agreement between Women.com and WOMEN.COM NETWORKS, INC.)",
            CONTRACT,
            "Does the contract contain a license granted by one party to its counterparty?",
        ),
    ],
)  # fmt: skip
def test_scoped_query(query: str, names: list[Name], expected: str) -> None:
    assert scoped_query(query, names) == expected


def test_a_namesake_company_is_not_taken_for_the_document() -> None:
    ltd = document_names(domain="Finance", title="Green Fields Agriculture Ltd.", content="")
    assert [name.text for name in ltd] == ["Green Fields Agriculture Ltd.", "Green Fields Agriculture"]
    assert (
        scoped_query("Did Green Fields Agriculture Co. buy from Green Fields Agriculture in 2018?", ltd)
        == "Did Green Fields Agriculture Co. buy from the company in 2018?"
    )


def test_principal_person() -> None:
    assert principal_person(JUDGMENT, "Defendant") == "N. Adams"
    assert principal_person(JUDGMENT_FULL_NAME, "Defendant") == "J. Thompson"
    assert principal_person(RECORD, "Name") == "E. Cruz"
    assert principal_person("No one is named here.", "Name") is None
