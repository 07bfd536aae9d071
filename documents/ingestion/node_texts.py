"""Extractive titles and summaries for the nodes of a structural tree (pure, no Django).

A node without a heading is titled by a key phrase (an n-gram frequent in the node and rare in
the rest of the document and among its siblings; no two siblings get the same one) and summarised by its sentences closest to the centroid of its leaves
(a sentence has the vector of the paragraph, or leaf-sized block, it belongs to);
the document title comes from its title headings or a short line near the top.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from documents.ingestion.heading_titles import TITLE_CHARS, Heading, clean_title, shorten, word_set
from documents.ingestion.prose import before_address, is_address_phrase, not_prose, without_addresses


@dataclass
class Draft:
    """A node over the unit range [first, last); no children means a leaf. ``NodeTexts`` fills
    its title and summary."""

    first: int
    last: int
    heading: Heading | None = None
    children: list[Draft] = field(default_factory=list)
    title: str = ""
    summary: str = ""


class Unit(Protocol):
    """A span of the text the structural builder works in (a paragraph or part of one)."""

    start: int
    end: int
    heading: Heading | None
    heading_only: bool


class NodeTextsSource(Protocol):
    """What ``NodeTexts`` reads of the structural builder
    (``documents.ingestion.structural.StructuralTreeBuilder``): the text, its units and their
    vectors, and whether units are nothing but the document's title lines. A protocol, so this
    module does not import the builder that imports it."""

    text: str
    vectors: np.ndarray

    @property
    def units(self) -> Sequence[Unit]: ...

    def mean_vector(self, draft: Draft) -> np.ndarray: ...

    def only_titles(self, first: int, last: int) -> bool: ...


_SUMMARY_WORDS = 60
_SUMMARY_SENTENCES = 3

_STOPWORDS = word_set(
    "a about above after again against all also am an and any are as at be because been before "
    "being below between both but by can could did do does doing down during each either few for "
    "from further had has have having he her here hereby herein hereof hereto hereunder his how i "
    "if in into is it its itself may might more most must my no nor not now of off on once only "
    "or other our out over own per same shall she should so some such than that the their them "
    "then there these they this those through thus to too under until up upon us very was we were "
    "what when where which while who whom why will with within without would you your january "
    "february march april may june july august september october november december agreement "
    "section article party parties forth behalf time times day days month months year years thereof "
    "therein thereto thereunder whether including include includes pursuant respect accordance "
    "provided following set prior subject notwithstanding hereinafter company million billion "
    "thousand total percent mean means meaning entity whereas regarding concerning provide provides "
    "one two three four five six seven eight nine ten first second third last next"
)
# The only small words a key phrase may hold inside it ("Revocation of Acceptance").
_PHRASE_JOINERS = frozenset(["of", "and", "for", "&"])
_MARKUP = re.compile(r"[*_#`|\\]+|^[=-]{3,}$", re.MULTILINE)
_POSSESSIVE = re.compile(r"['\u2019]s?$")
_WORD = re.compile(r"[^\W\d_][\w'\u2019&-]*")
# Punctuation, line ends and numbers end a phrase ("Suite 200 Wayne" holds no "Suite Wayne").
_PHRASE_BREAK = re.compile(r"[^\w\s'\u2019&-]+|\n|(?<![\w-])\d[\w'\u2019&-]*")
_LENGTH_BOOST = {1: 1.0, 2: 1.6, 3: 1.9}
_VERB_ADVERB_ENDINGS = ("ed", "ly")
_NEVER_LAST = word_set(
    "major minor internal external regulatory significant various overall related new key main "
    "certain aims aim"
)
_ADJECTIVE_ENDINGS = ("ional", "ical", "ntial", "cial", "ental", "ous", "ful", "-term")
_JUNK_TITLE_LINE = re.compile(
    r"^(exhibit|ex-\d|page\b|source:|table of contents|\[|\d+$|execution (copy|version)|confidential"
    r"|certain (portions|information)|last updated)|\b(19|20)\d\d$",
    re.IGNORECASE,
)
# How a contract names its parties and the reasons it is made, in its opening.
_PREAMBLE = re.compile(
    r"\b(?:by and between|by and among|is between|made between|BETWEEN:|WHEREAS|RECITALS|Recitals)"
)
_DOCUMENT_KIND = re.compile(
    r"\b(agreement|contract|amendment|addendum|licen[cs]e|lease|deed|memorandum|policy|plan|report|"
    r"record|judgment|judgement|manual|guide|terms|charter|bylaws|minutes|statement)\b",
    re.IGNORECASE,
)


class NodeTexts:
    """Fills titles and summaries of every internal draft, children before parents."""

    def __init__(self, builder: NodeTextsSource) -> None:
        self.builder = builder
        text = builder.text
        # Each unit once, markup stripped and blanks collapsed: what titles and summaries quote.
        self.plain = [
            " ".join(_MARKUP.sub(" ", text[unit.start : unit.end]).split()) for unit in builder.units
        ]
        self.footprints = [_footprint(sentence) for sentence in self.plain]
        # Addresses, price and table rows and bracket debris are no title or summary material;
        # a long sentence that ends in an address is quoted up to it.
        self.prose = [not flag for flag in not_prose(self.plain)]
        self.quotable = [
            sentence if prose else before_address(sentence)
            for sentence, prose in zip(self.plain, self.prose, strict=True)
        ]
        self.leaf_firsts: list[int] = []
        self._leaf_counts: list[Counter[str]] | None = None
        self._surface: dict[str, str] = {}
        self._repeated: set[str] = set()
        self._range_cache: dict[tuple[int, int], Counter[str]] = {}
        self._document_words: set[str] = set()

    def fill(
        self,
        draft: Draft,
        depth: int,
        inherited: Heading | None = None,
        *,
        parent: Draft | None = None,
        taken: set[str] | None = None,
    ) -> None:
        """Fill ``draft`` and its internal descendants; ``taken``: the titles its earlier siblings
        got, which it must not repeat."""
        if depth == 0:
            self.leaf_firsts = [leaf.first for leaf in _leaves_of(draft)]
            self._repeated = self._repeated_lines()
            self._document_words = self._document_topic_words()
        sibling_titles: set[str] = set()
        for child in draft.children:
            if child.children:
                self.fill(child, depth + 1, draft.heading or inherited, parent=draft, taken=sibling_titles)
                sibling_titles.add(child.title.casefold())
        draft.title = (
            self._title(draft, depth, inherited, parent=parent, taken=taken or set())
            or shorten(self._plain(draft.first, draft.last), 40)
            or "Part"
        )
        draft.summary = self._summary(draft) or draft.title

    def _title(
        self, draft: Draft, depth: int, inherited: Heading | None, *, parent: Draft | None, taken: set[str]
    ) -> str:
        if draft.heading is not None and draft.heading.title:
            return draft.heading.title
        if draft.heading is None and depth > 0:
            headed_parts = self._headed_parts_title(draft, inherited)
            if headed_parts:
                return headed_parts
        if self._is_preamble(draft, depth, parent):
            return "Preamble"
        label = draft.heading.label if draft.heading is not None else ""
        phrase = self._key_phrase(draft, parent=parent if depth > 0 else None, taken=taken)
        if label:
            return shorten(f"{label} {phrase}".strip(), TITLE_CHARS)
        return phrase

    def _headed_parts_title(self, draft: Draft, inherited: Heading | None) -> str:
        """A group of small headed parts ("Chief Complaint", "Present Illness") is named by them
        (by the first three); "" when none inside has a titled heading of its own."""
        units = self.builder.units[draft.first : draft.last]
        titles = [
            unit.heading.title
            for unit in units
            if unit.heading is not None and unit.heading.title and unit.heading is not inherited
        ]
        if not titles:
            return ""
        return shorten("; ".join(titles[:3]) + ("; \u2026" if len(titles) > 3 else ""), TITLE_CHARS)

    def _is_preamble(self, draft: Draft, depth: int, parent: Draft | None) -> bool:
        """The untitled opening of a contract, where it names its parties and recitals: what any
        phrase of it (a party, its address) would misname."""
        return (
            depth == 1
            and draft.heading is None
            and self._opens_the_body(draft, parent)
            and bool(_PREAMBLE.search(self._plain(draft.first, draft.last)))
        )

    def _opens_the_body(self, draft: Draft, parent: Draft | None) -> bool:
        """The part starts the text, or right after the document's title lines (their passage)."""
        if draft.first == 0:
            return True
        if parent is None:
            return False
        before = itertools.takewhile(lambda sibling: sibling is not draft, parent.children)
        return all(
            not sibling.children and self.builder.only_titles(sibling.first, sibling.last)
            for sibling in before
        )

    def _summary(self, draft: Draft) -> str:
        candidates = self._summary_candidates(draft)
        if not candidates:
            # Short lines only: quote them, but never a price list or an address block (then the
            # summary is the title).
            prose = [self.plain[index] for index in range(draft.first, draft.last) if self.prose[index]]
            return _shorten_words(" ".join(sentence for sentence in prose if sentence), _SUMMARY_WORDS)
        chosen = self._central_sentences(draft, candidates)
        summary = " ".join(self.quotable[index] for index in sorted(chosen))
        return _shorten_words(summary, _SUMMARY_WORDS)

    def _summary_candidates(self, draft: Draft) -> list[int]:
        """The units of ``draft`` a summary may quote: sentences of four words or more, not
        heading lines, not repeated on other pages (headers and footers)."""
        units = self.builder.units
        return [
            index
            for index in range(draft.first, draft.last)
            if not units[index].heading_only
            and self.quotable[index].count(" ") >= 3
            and self.footprints[index] not in self._repeated
        ]

    def _central_sentences(self, draft: Draft, candidates: list[int]) -> list[int]:
        """The ``candidates`` closest to the centroid of the draft's leaves, best first, up to
        ``_SUMMARY_SENTENCES`` of them or two thirds of ``_SUMMARY_WORDS``; one that would pass
        ``_SUMMARY_WORDS`` is skipped (unless it is the first)."""
        leaf_vectors = np.stack([self.builder.mean_vector(leaf) for leaf in _leaves_of(draft)])
        centroid = leaf_vectors.mean(axis=0)
        scores = self.builder.vectors[candidates] @ centroid
        chosen: list[int] = []
        words = 0
        for position in np.argsort(-scores, kind="stable"):
            index = candidates[int(position)]
            length = self.quotable[index].count(" ") + 1
            if chosen and words + length > _SUMMARY_WORDS:
                continue
            chosen.append(index)
            words += length
            if len(chosen) >= _SUMMARY_SENTENCES or words >= _SUMMARY_WORDS * 2 // 3:
                break
        return chosen

    def _repeated_lines(self) -> set[str]:
        """Units seen more than once up to digits: page headers and footers, never summary material."""
        seen = Counter(self.footprints)
        return {footprint for footprint, count in seen.items() if count > 1}

    def _plain(self, first: int, last: int) -> str:
        return " ".join(sentence for sentence in self.plain[first:last] if sentence)

    def _prose(self, first: int, last: int) -> str:
        """The prose of units [first, last); each piece that is not prose breaks the phrases."""
        return " ".join(
            without_addresses(sentence) if prose else "\n"
            for sentence, prose in zip(self.plain[first:last], self.prose[first:last], strict=True)
            if sentence
        )

    # -- key phrases: n-grams frequent in the node and rare in the rest of the document

    def _key_phrase(self, draft: Draft, *, parent: Draft | None, taken: set[str]) -> str:
        """A short phrase a person could have written as the title: the phrase most frequent in
        the node, and (for a section) rare in the rest of the document, siblings included, so
        that siblings read apart. A lone word takes a second phrase ("Debt and Operating Income").
        Never one of ``taken`` (the titles of earlier siblings)."""
        total = self._range_counts(draft.first, draft.last)
        everywhere = self._range_counts(0, len(self.builder.units))

        def score(phrase: str) -> float:
            weight = total[phrase] * _LENGTH_BOOST[phrase.count(" ") + 1]
            if parent is not None:
                # The share of the phrase's uses that fall in this node: a phrase spread over
                # the document (or over the siblings) names none of them.
                weight *= total[phrase] / everywhere[phrase]
            return weight

        ranked = [
            phrase
            for phrase in sorted(total, key=lambda phrase: (-score(phrase), phrase))
            if score(phrase) > 0
            # What the whole document is about (the company's name) names none of its sections.
            and not (parent is not None and set(phrase.split()) <= self._document_words)
            and not is_address_phrase(phrase)
        ]
        for index, phrase in enumerate(ranked):
            title = self._surface[phrase]
            if " " not in phrase:
                title = self._lone_word_title(phrase, ranked[index + 1 : index + 8], total)
            title = shorten(title[:1].upper() + title[1:], TITLE_CHARS)
            if title.casefold() not in taken and not is_address_phrase(title):
                return title
        return ""

    def _document_topic_words(self) -> set[str]:
        """The words of the document's most used multi-word phrase (said at least three times),
        typically the name of whoever the document is about."""
        everywhere = self._range_counts(0, len(self.builder.units))
        phrases = [phrase for phrase, count in everywhere.items() if count >= 3 and " " in phrase]
        if not phrases:
            return set()
        top = max(
            phrases, key=lambda phrase: (everywhere[phrase] * _LENGTH_BOOST[phrase.count(" ") + 1], phrase)
        )
        return set(top.split())

    def _lone_word_title(self, word: str, next_best: Sequence[str], total: Counter[str]) -> str:
        """A single word says little: the phrase it is mostly used in ("risk" → "Risk factors"),
        else it and the next topic of the node ("Debt and operating income")."""
        wider = [
            phrase
            for phrase in total
            if " " in phrase and word in phrase.split() and total[phrase] * 2 >= total[word]
        ]
        if wider:
            return self._surface[max(wider, key=lambda phrase: (total[phrase], len(phrase), phrase))]
        for other in next_best:
            if self._is_second_topic(word, other, total):
                return f"{self._surface[word]} and {self._surface[other]}"
        return self._surface[word]

    def _is_second_topic(self, word: str, other: str, total: Counter[str]) -> bool:
        """Whether ``other`` may follow ``word`` in "<word> and <other>"."""
        return (
            total[other] > 1  # said more than once: a topic, not a passing phrase
            and word not in other.split()
            and " and " not in self._surface[other]
            and f"{word} {other}" not in total  # not the two halves of one phrase
            and f"{other} {word}" not in total
        )

    def _range_counts(self, first: int, last: int) -> Counter[str]:
        """Phrase counts of the leaves in the unit range [first, last)."""
        key = (first, last)
        cached = self._range_cache.get(key)
        if cached is None:
            counts = self._counts()
            low = bisect.bisect_left(self.leaf_firsts, first)
            high = bisect.bisect_left(self.leaf_firsts, last)
            cached = Counter()
            for leaf_counts in counts[low:high]:
                cached.update(leaf_counts)
            self._range_cache[key] = cached
        return cached

    def _counts(self) -> list[Counter[str]]:
        if self._leaf_counts is None:
            bounds = [*self.leaf_firsts, len(self.builder.units)]
            self._leaf_counts = [
                self._phrases(bounds[i], bounds[i + 1]) for i in range(len(self.leaf_firsts))
            ]
        return self._leaf_counts

    def _phrases(self, first: int, last: int) -> Counter[str]:
        counts: Counter[str] = Counter()
        for segment in _PHRASE_BREAK.split(self._prose(first, last)):
            words = [_POSSESSIVE.sub("", word) for word in _WORD.findall(segment)]
            lowered = [word.lower() for word in words]
            for start, size in _phrase_spans(lowered):
                phrase = " ".join(lowered[start : start + size])
                counts[phrase] += 1
                self._surface.setdefault(phrase, " ".join(words[start : start + size]))
        return counts


def _phrase_spans(lowered: list[str]) -> Iterator[tuple[int, int]]:
    """(start, size) of each 1- to 3-word phrase of ``lowered`` (lowercased words), the single
    words first, then the pairs, then the triples."""
    for size in (1, 2, 3):
        for start in range(len(lowered) - size + 1):
            if _is_phrase(lowered[start : start + size]):
                yield start, size


def _is_phrase(gram: list[str]) -> bool:
    """Content words at both ends, a noun last; inside a triple only a joiner ("of", "and")
    among the stopwords; a lone word of four letters or more."""
    if not (_phrase_edge(gram[0]) and _phrase_end(gram[-1])):
        return False
    if len(gram) == 3 and gram[1] in _STOPWORDS and gram[1] not in _PHRASE_JOINERS:
        return False
    return not (len(gram) == 1 and len(gram[0]) < 4)


def _footprint(sentence: str) -> str:
    return re.sub(r"[\d\W_]+", " ", sentence.lower()).strip()


@functools.cache
def _phrase_edge(word: str) -> bool:
    """Phrases start and end with content words; "-ed" and "-ly" words are mostly verbs and
    adverbs ("allowed", "further expanded"), which make poor titles."""
    if word in _STOPWORDS or len(word) < 3:
        return False
    return not (len(word) > 4 and word.endswith(_VERB_ADVERB_ENDINGS))


@functools.cache
def _phrase_end(word: str) -> bool:
    """The last word of a title phrase is a noun: not an adjective that leaves the phrase hanging
    ("Structure and operational", "Continuity and long-term")."""
    return (
        _phrase_edge(word)
        and word not in _NEVER_LAST
        and not (len(word) > 5 and word.endswith(_ADJECTIVE_ENDINGS))
    )


def _leaves_of(draft: Draft) -> list[Draft]:
    if not draft.children:
        return [draft]
    return [leaf for child in draft.children for leaf in _leaves_of(child)]


def _shorten_words(text: str, limit: int) -> str:
    words = text.split()
    return text if len(words) <= limit else " ".join(words[:limit]) + "\u2026"


def first_line_title(text: str) -> str:
    """A short line near the top: the first naming the kind of document ("RESELLER AGREEMENT"),
    else the first that is not an exhibit number, a date or a filing notice; none when the text
    opens with a paragraph."""
    candidates: list[str] = []
    for raw in re.split(r"\n|[ \t\u00a0]{3,}", text[:1500])[:12]:
        line = _title_line(raw)
        if line is None:
            continue
        if len(line.split()) > 12 or len(line) > TITLE_CHARS:
            # A paragraph: the title lines are over.
            return clean_title(candidates[0]) if candidates else _capitalised_kind(line)
        if _DOCUMENT_KIND.search(line) and not line.lower().startswith("this "):
            return clean_title(line)
        candidates.append(line)
    return clean_title(candidates[0]) if candidates else ""


def _title_line(raw: str) -> str | None:
    """``raw`` without markup, brackets and the punctuation at its ends; None when it is no
    title (no word in it, an exhibit number, a date, a filing notice)."""
    line = " ".join(re.sub(r"[*_`#]+", " ", raw).split()).strip(" .:;,-")
    if not re.search(r"[^\W\d_]{2}", line) or _JUNK_TITLE_LINE.search(line):
        return None
    return line.strip("[]")


def _capitalised_kind(line: str) -> str:
    """The capitalised words opening a long first line when they name the kind of document
    ("SERVICE AGREEMENT This Agreement is entered into ..."), else ""."""
    caps = re.match(r"^(?:[A-Z][A-Z&,'-]+\s+){1,7}[A-Z][A-Z&'-]+\b", line)
    if caps and _DOCUMENT_KIND.search(caps.group()):
        return clean_title(caps.group())  # eight long capitalised words can pass TITLE_CHARS
    return ""
