// "Ask this document" (issue 22 item 8): the answer's passages marked in the outline (a badge on
// each chosen node, its branch opened) and in the text (each chunk highlighted, the text box,
// never the window, scrolled to the first). The marks come back after the outline and the text
// are swapped for another selection or an edit, until the person clears them.
(() => {
  let spans = [];  // the latest answer: {node, start, end}, offsets in code points of the text

  // The server counts Unicode code points, the DOM UTF-16 units (they differ past U+FFFF).
  const pointLength = (text) => { let count = 0; for (const _ of text) count++; return count; };
  function unitsAt(text, points) {
    let units = 0;
    for (let seen = 0; seen < points && units < text.length; seen++) units += text.codePointAt(units) > 0xffff ? 2 : 1;
    return units;
  }

  function clear() {
    for (const mark of document.querySelectorAll("mark.answer-mark")) mark.replaceWith(...mark.childNodes);
    document.getElementById("document-text")?.normalize();
    for (const item of document.querySelectorAll(".in-answer")) item.classList.remove("in-answer");
    for (const badge of document.querySelectorAll(".answer-badge")) badge.remove();
  }

  function markText(box) {
    const pieces = [];
    const walker = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(), at = 0; node; node = walker.nextNode()) {
      const length = pointLength(node.data);
      pieces.push({ node, start: at, end: at + length });
      at += length;
    }
    const wraps = [];
    for (const span of [...spans].sort((a, b) => a.start - b.start)) {
      for (const piece of pieces) {
        const from = Math.max(span.start, piece.start);
        const to = Math.min(span.end, piece.end);
        if (from < to) wraps.push({ node: piece.node, from: from - piece.start, to: to - piece.start });
      }
    }
    // Last first: wrapping the end of a text node leaves its beginning where it was.
    for (const wrap of wraps.reverse()) {
      const range = document.createRange();
      range.setStart(wrap.node, unitsAt(wrap.node.data, wrap.from));
      range.setEnd(wrap.node, unitsAt(wrap.node.data, wrap.to));
      const mark = document.createElement("mark");
      mark.className = "answer-mark";
      range.surroundContents(mark);
    }
  }

  function markOutline() {
    let first = null;
    for (const span of spans) {
      const item = span.node && document.getElementById(`node-${span.node}`);
      if (!item || item.classList.contains("in-answer")) continue;
      item.classList.add("in-answer");
      const badge = document.createElement("span");
      badge.className = "marker marker-answer answer-badge";
      badge.textContent = "in the answer";
      item.querySelector(":scope > .node-row")?.append(" ", badge);
      for (let up = item.parentElement.closest('[role="treeitem"]'); up; up = up.parentElement.closest('[role="treeitem"]')) {
        if (up.hasAttribute("aria-expanded")) up.setAttribute("aria-expanded", "true");
      }
      first = first || item;
    }
    return first;
  }

  function apply({ scroll }) {
    clear();
    const box = document.getElementById("document-text");
    if (!spans.length || !box) return;
    markText(box);
    const item = markOutline();
    if (!scroll) return;
    const mark = box.querySelector("mark.answer-mark");
    if (mark) box.scrollTop = Math.max(0, mark.offsetTop - box.clientTop - 16);
    const outline = item && item.closest(".outline");
    if (outline) {
      const row = item.querySelector(":scope > .node-row") || item;
      outline.scrollTop += row.getBoundingClientRect().top - outline.getBoundingClientRect().top - outline.clientHeight / 3;
    }
  }

  // After the settle, not the swap: htmx settles the class of each element whose id was already
  // on the page (the treeitems) back to the server's, which would drop the marks.
  document.addEventListener("htmx:afterSettle", (event) => {
    const target = event.detail.target;
    if (target.id === "answer") {
      const data = document.getElementById("answer-spans");
      spans = data ? JSON.parse(data.textContent) : [];
      apply({ scroll: true });
    } else if (target.id === "document-layout" && spans.length) {
      apply({ scroll: false });  // a new selection scrolls the text to itself (app.js)
    }
  });

  document.addEventListener("click", (event) => {
    if (!event.target.closest("[data-answer-clear]")) return;
    spans = [];
    clear();
    document.getElementById("answer").replaceChildren();
    document.getElementById("ask-query")?.focus();
  });
})();
