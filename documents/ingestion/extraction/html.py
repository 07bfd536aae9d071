"""An HTML page's article as blocks: ``h1``-``h6`` become headings, a table one row a line, the
navigation chrome around the article left out (selectolax, MIT: the Lexbor parser). Pure, no Django.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Sequence
from typing import Any

from documents.ingestion.extraction.assemble import Block, clean_line
from documents.ingestion.extraction.model import Deadline

# Never the document's text, wherever they sit.
_CHROME = (
    "script, style, noscript, template, svg, iframe, object, canvas, nav, aside, form, button, select, "
    "dialog, [role=navigation], [role=search], [role=complementary], [aria-hidden=true], [hidden]"
)
# The site's header and footer, but an article's own header (its title) stays.
_PAGE_FRAME = ("header", "footer", "[role=banner]", "[role=contentinfo]")
_HEADINGS = {f"h{level}": level for level in range(1, 7)}
_BLOCKS = frozenset(
    [
        "p",
        "div",
        "section",
        "article",
        "main",
        "body",
        "li",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "blockquote",
        "pre",
        "figure",
        "figcaption",
        "address",
        "details",
        "summary",
        "fieldset",
        "hr",
        "header",
        "footer",
        "caption",
        "center",
    ]
)
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)


def decode_html(data: bytes) -> str:
    """By byte-order mark, then the page's own ``<meta charset>``, then UTF-8, else Windows-1252."""
    for bom, encoding in (
        (codecs.BOM_UTF8, "utf-8"),
        (codecs.BOM_UTF16_LE, "utf-16-le"),
        (codecs.BOM_UTF16_BE, "utf-16-be"),
    ):
        if data.startswith(bom):
            return data[len(bom) :].decode(encoding, errors="replace")
    declared = _META_CHARSET.search(data[:4096])
    if declared:
        try:
            return data.decode(codecs.lookup(declared.group(1).decode("ascii")).name, errors="replace")
        except LookupError:
            pass
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


def html_blocks(data: bytes, *, deadline: Deadline) -> list[Block]:
    from selectolax.lexbor import LexborHTMLParser  # imported when a page is read

    tree = LexborHTMLParser(decode_html(data))
    page_title = _page_title(tree)
    _remove_chrome(tree)
    root = _article(tree)
    blocks = _Walker(deadline).walk(root) if root is not None else []
    if page_title and not any(block.heading_level == 1 for block in blocks):
        blocks.insert(0, Block(page_title, 1, 1, "tag"))
    return blocks


def _page_title(tree: Any) -> str:
    """The page's ``<title>``: its heading when the article has no ``h1`` of its own."""
    title_node = tree.css_first("title")
    return clean_line(title_node.text()) if title_node is not None else ""


def _remove_chrome(tree: Any) -> None:
    """What is never the document's text, and the site's header and footer around the article."""
    for node in tree.css(_CHROME):
        node.decompose()
    for selector in _PAGE_FRAME:
        for node in tree.css(selector):
            if not _inside(node, ("article", "main")):
                node.decompose()


def _article(tree: Any) -> Any:
    """Where the text is: ``<main>``, else the one ``<article>``, else the whole body."""
    return tree.css_first("main") or _only(tree.css("article")) or tree.body or tree.root


def _inside(node: object, tags: tuple[str, ...]) -> bool:
    parent = getattr(node, "parent", None)
    while parent is not None:
        if parent.tag in tags:
            return True
        parent = parent.parent
    return False


def _only(nodes: Sequence[object]) -> object | None:
    return nodes[0] if len(nodes) == 1 else None


class _Walker:
    """Depth first without recursion (a page may nest thousands deep): inline text gathers into
    the current line, a block element or ``<br>`` ends it."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.blocks: list[Block] = []
        self.inline: list[str] = []
        self.continues = False  # the next line continues a paragraph (after a <br>)

    def flush(self, *, line_break: bool = False) -> None:
        text = clean_line("".join(self.inline))
        self.inline.clear()
        if text:
            self.blocks.append(Block(text, 1, new_paragraph=not self.continues))
        self.continues = line_break and bool(text or self.continues)

    def walk(self, root: object) -> list[Block]:
        stack: list[tuple[object, bool]] = [(root, True)]
        steps = 0
        while stack:
            node, entering = stack.pop()
            steps += 1
            if steps % 2000 == 0:
                self.deadline.check()
            if entering:
                self.enter(node, stack)
            else:
                self.flush()  # leaving a block element ends its line
        self.flush()
        return self.blocks

    def enter(self, node: Any, stack: list[tuple[object, bool]]) -> None:
        """Read ``node`` as it is reached: text, a heading, a table and a ``<br>`` at once; any
        other element by its children, pushed onto ``stack`` (after its own exit, for a block)."""
        tag = node.tag
        if tag == "-text":
            self.inline.append(node.text_content or "")
        elif tag in _HEADINGS:
            self.flush()
            text = clean_line(node.text(separator=""))
            if text:
                self.blocks.append(Block(text, 1, _HEADINGS[tag], "tag"))
        elif tag == "table":
            self.flush()
            self.blocks.extend(_table_rows(node))
        elif tag == "br":
            self.flush(line_break=True)
        else:
            if tag in _BLOCKS:
                self.flush()
                stack.append((node, False))
            stack.extend((child, True) for child in reversed(_children(node)))


def _children(node: Any) -> list[Any]:
    """The node's children, comments left out."""
    children = []
    child = node.child
    while child is not None:
        if child.tag != "-comment":
            children.append(child)
        child = child.next
    return children


def _table_rows(table: object) -> list[Block]:
    rows: list[Block] = []
    for row in table.css("tr"):  # type: ignore[attr-defined]
        cells = [clean_line(cell.text(separator=" ")) for cell in row.css("th, td")]
        if any(cells):
            rows.append(Block(" | ".join(cells), 1, new_paragraph=not rows))
    return rows
