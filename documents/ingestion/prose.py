"""Which pieces of a document are prose a title or summary may quote (pure, no Django).

Addresses ("1000 Valley Drive Suite 200 Wayne, NJ 07470"), price and table rows ("Sumadan Wash 15
[ ] = [ ] per unit"), the header line of such a table, and bracket debris left by redaction are
text, but no phrase built from them names a section, and no sentence of them sums one up.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# A street address: a number, up to four capitalised words, a street word ("383 Route 46",
# "1000 Valley Drive"); a suite, floor or post-office box with its number; a postcode after a
# state or place ("NJ 07470", "Fairfield, New Jersey 07004"); a contact line ("Attention:").
_ADDRESS_SIGNALS = (
    re.compile(
        r"\b\d{1,6}[A-Za-z]?,?\s+(?:[A-Z][\w.'\u2019-]*\s+){0,4}(?:Street|St|Avenue|Ave|Road|Rd|Drive|Dr"
        r"|Boulevard|Blvd|Lane|Ln|Parkway|Pkwy|Place|Pl|Way|Court|Ct|Plaza|Highway|Hwy|Route|Circle"
        r"|Square|Terrace)\b"
    ),
    re.compile(r"\b(?:Suite|Ste\.?|Floor|Fl\.|P\.?\s?O\.?\s?Box)\s*#?\d"),
    re.compile(r"\b[A-Z][A-Za-z]+,?\s+\d{5}(?:-\d{4})?\b"),
    re.compile(r"\b[A-Z]{1,2}\d[A-Z\d]?\s\d[A-Z]{2}\b"),  # a British postcode ("W1S 4JL")
    re.compile(r"(?i)\b(?:attention|attn|facsimile|fax|telephone|tel|phone|e-?mail)\s*[:.]"),
)
# Words a person reads: letters, possibly with trailing punctuation ("Agreement,", "Buyer's").
_WORD = re.compile(r"[(\"'\u201c\u2018]?[^\W\d_]+[\w'\u2019\u201d\".,;:)-]*")
# A table or price row is mostly numbers, symbols and debris (fewer than this share of words),
# with an amount, a redaction ("[ ]", "[***]") or an equals sign; a form line ("Pulse: 88 bpm")
# is no table row, and a clause with a redacted word or two is prose.
_TABLE_SIGN = re.compile(r"[$\u20ac\u00a3\u00a5=]|\b(?:USD|EUR|GBP)\b|\[\s*(?:\*+|x+|X+|_+)?\s*\]")
_LIST_MARK = re.compile(r"[-\u2013\u2014\u2022*\u00b7]+")
_MIN_WORD_SHARE = 0.6
# A line with one address signal is an address when it is this short and a neighbour holds one
# too (an address block's line); a longer sentence that mentions an address in passing is prose.
_ADDRESS_LINE_WORDS = 8
# A sentence this long that holds a whole address ("Each notice ... shall be sent to the address
# below: ...") is quoted by a summary up to the address (``before_address``), when this many
# words come before it.
_PROSE_WORDS = 40
_WORDS_BEFORE_ADDRESS = 12
# The filing notice atop a redacted contract ("[***] Certain information in this document has
# been excluded pursuant to Regulation S-K ... would likely cause competitive harm").
_REDACTION_NOTICE = re.compile(
    r"(?i)\b(?:omitted|excluded|redacted)\b.*\b(?:confidential treatment|regulation s-k|rule 24b-2"
    r"|competitive harm|securities and exchange commission)|\[\*+\]\s*(?:=|indicates)"
)
# Phrases that only lead up to an address.
_ADDRESS_PHRASE = re.compile(
    r"(?i)\b(?:place of business|principal (?:place|office|offices|executive)|registered office"
    r"|executive offices|mailing address|notice address)\b"
)
# A table's header line: at most this many words, no sentence end, right above a table row.
_HEADER_WORDS = 8


def not_prose(sentences: Sequence[str]) -> list[bool]:
    """For each sentence (a unit's plain text, in document order): True when it is an address,
    a table or price row, bracket debris, a redaction notice, or the header line of a table."""
    rows = [_is_row(sentence) for sentence in sentences]
    signals = [_address_signals(sentence) for sentence in sentences]
    flags = [
        row or _is_address(sentence, signals, index) or bool(_REDACTION_NOTICE.search(sentence))
        for index, (row, sentence) in enumerate(zip(rows, sentences, strict=True))
    ]
    for index in range(len(sentences) - 2):
        if rows[index + 1] and rows[index + 2] and _is_header(sentences[index]):
            flags[index] = True
    return flags


def without_addresses(sentence: str) -> str:
    """``sentence`` with each street, suite and postcode it mentions replaced by a line break, so no
    phrase is built from them ("at 46 Albemarle Street, London" keeps no "Albemarle Street")."""
    for pattern in _ADDRESS_SIGNALS[:-1]:
        sentence = pattern.sub("\n", sentence)
    return sentence


def before_address(sentence: str) -> str:
    """The part of a long sentence before the whole address it holds, with an ellipsis ("Each
    notice shall be given in writing ... at the following address…"); "" when the sentence is
    short, holds no whole address, is a table row or a redaction notice, or the address comes
    within its first words."""
    if (
        len(sentence.split()) <= _PROSE_WORDS
        or _address_signals(sentence) < 2
        or _is_row(sentence)
        or _REDACTION_NOTICE.search(sentence)
    ):
        return ""
    first = min(found.start() for pattern in _ADDRESS_SIGNALS if (found := pattern.search(sentence)))
    before = sentence[:first].rstrip(" ,;:(")
    return before + "\u2026" if len(before.split()) >= _WORDS_BEFORE_ADDRESS else ""


def is_address_phrase(phrase: str) -> bool:
    """ "place of business", "principal office": phrases that only introduce an address."""
    return bool(_ADDRESS_PHRASE.search(phrase))


def _is_row(sentence: str) -> bool:
    tokens = [token for token in sentence.split() if not _LIST_MARK.fullmatch(token)]
    if len(tokens) < 3 or not _TABLE_SIGN.search(sentence):
        return False
    words = sum(1 for token in tokens if _WORD.fullmatch(token))
    return words / len(tokens) < _MIN_WORD_SHARE


def _is_address(sentence: str, signals: Sequence[int], index: int) -> bool:
    """Two signals make an address; one makes a short line an address only inside an address block
    (a neighbour with a signal too: "383 Route 46 West" above "Fairfield, New Jersey"). A lone
    labelled line among other facts ("Residence: 47 Charleston Street, Yorktown" between a birth
    date and an occupation) is what the passage says about someone, and a summary may quote it;
    ``without_addresses`` still keeps its street out of any title."""
    own = signals[index]
    if own >= 2:
        return True
    if own == 0 or len(sentence.split()) > _ADDRESS_LINE_WORDS:
        return False
    neighbours = [*signals[max(0, index - 1) : index], *signals[index + 1 : index + 2]]
    return any(neighbours)


def _address_signals(sentence: str) -> int:
    return sum(len(pattern.findall(sentence)) for pattern in _ADDRESS_SIGNALS)


def _is_header(sentence: str) -> bool:
    words = sentence.split()
    return 0 < len(words) <= _HEADER_WORDS and not sentence.rstrip().endswith((".", ":", ";", "?", "!"))
