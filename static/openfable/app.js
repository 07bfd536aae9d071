// Drop files (PDF, Word, HTML, Markdown, text) anywhere on a page with an upload form: they go
// into its file input, as if chosen, and its panel opens with "Add and index" focused. Only a
// drag that carries files counts (moving a node in the outline is a drag too).
(() => {
  let depth = 0;  // dragenter/dragleave fire for every element crossed: count them
  const uploadForm = () => document.querySelector("form[data-dropzone]");
  const carriesFiles = (event) => [...(event.dataTransfer?.types || [])].includes("Files");
  const done = () => { depth = 0; document.body.classList.remove("dropping-files"); };

  document.addEventListener("dragenter", (event) => {
    if (!carriesFiles(event) || !uploadForm()) return;
    depth += 1;
    document.body.classList.add("dropping-files");
  });
  document.addEventListener("dragleave", (event) => {
    if (!carriesFiles(event) || !uploadForm()) return;
    depth = Math.max(0, depth - 1);
    if (!depth) done();
  });
  document.addEventListener("dragover", (event) => {
    if (carriesFiles(event) && uploadForm()) event.preventDefault();  // lets the drop happen
  });
  document.addEventListener("drop", (event) => {
    const form = uploadForm();
    const input = form && form.querySelector("input[type=file]");
    if (!input || !carriesFiles(event)) return;
    event.preventDefault();
    done();
    if (!event.dataTransfer.files.length) return;
    input.files = event.dataTransfer.files;
    input.dispatchEvent(new Event("change", { bubbles: true }));
    const panel = form.closest("details");
    if (panel) panel.open = true;
    const count = input.files.length;
    const hint = form.querySelector(".dropzone-hint");
    if (hint) hint.textContent = `${count} file${count === 1 ? "" : "s"} ready: choose the collection and tags if you like, then press Add and index.`;
    form.querySelector("button[type=submit]")?.focus();
  });
})();

// htmx leaves a 4xx answer out of the page; a 429 ("too many requests, try again in N seconds")
// is a fragment meant for the person (the query page's results, a document's answer box): show it.
document.addEventListener("htmx:beforeSwap", (event) => {
  if (event.detail.xhr.status === 429) {
    event.detail.shouldSwap = true;
    event.detail.isError = false;
  }
});

// No inline handlers (the Content-Security-Policy refuses them): an input with data-mirror copies
// its value to another (the budget's slider and its number), a form with data-confirm asks first.
document.addEventListener("input", (event) => {
  const target = event.target.closest && event.target.closest("[data-mirror]");
  const other = target && document.querySelector(target.dataset.mirror);
  if (other) other.value = target.value;
});
document.addEventListener("submit", (event) => {
  const form = event.target.closest && event.target.closest("form[data-confirm]");
  if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
});

// A row polled while its document indexes (data-poll-when-visible) is not asked for while the tab
// is hidden. Here, not in an htmx trigger filter: a filter is a string htmx evaluates, which the
// Content-Security-Policy refuses.
document.addEventListener("htmx:beforeRequest", (event) => {
  const source = event.detail.elt;
  if (source && source.hasAttribute && source.hasAttribute("data-poll-when-visible") && document.visibilityState !== "visible") {
    event.preventDefault();
  }
});

// "Copy context": the packed text of a query result to the clipboard.
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-copy]");
  if (!button) return;
  const source = document.querySelector(button.dataset.copy);
  navigator.clipboard.writeText(source.value).then(() => {
    button.textContent = "Copied";
    setTimeout(() => { button.textContent = "Copy context"; }, 1500);
  });
});

// Split a passage where the person clicks in its highlighted text: the click's character
// offset in the document goes into the split form.
document.addEventListener("click", (event) => {
  const mark = event.target.closest("#selected-text");
  const input = document.querySelector("[data-split-position]");
  if (!mark || !input || !document.caretRangeFromPoint) return;
  const range = document.caretRangeFromPoint(event.clientX, event.clientY);
  if (!range || !mark.contains(range.startContainer)) return;
  const before = document.createRange();
  before.setStart(mark, 0);
  before.setEnd(range.startContainer, range.startOffset);
  input.value = Number(mark.dataset.start) + before.toString().length;
});

// "Copy" beside a text shown once (a new API token).
document.addEventListener("click", (event) => {
  const button = event.target.closest("[data-copy-text]");
  if (!button) return;
  navigator.clipboard.writeText(document.querySelector(button.dataset.copyText).textContent);
  button.textContent = "Copied";
});

// -- The document outline: a WAI-ARIA tree view (https://www.w3.org/WAI/ARIA/apg/patterns/treeview/)
// One Tab stop (roving tabindex), Up/Down move, Right/Left open, close or go to the parent,
// Home/End, Enter selects, typing a title's first letters jumps to it. A selection or an edit
// swaps the outline with the panel (htmx); the outline keeps its scroll position, its closed
// branches and the keyboard focus across the swap, and only the text box scrolls to the
// highlighted node, never the window.
(() => {
  const closed = new Set();  // ids of branches the person closed, kept across swaps
  let kept = null;  // what the outline looked like just before a swap
  let typed = "";
  let typedAt = 0;

  const treeOf = (node) => node && node.closest('[role="tree"]');
  const itemsOf = (tree) => [...tree.querySelectorAll('[role="treeitem"]')];
  const isShown = (item) => !item.parentElement.closest('[role="treeitem"][aria-expanded="false"]');
  const shownItems = (tree) => itemsOf(tree).filter(isShown);
  const parentItem = (item) => item.parentElement.closest('[role="treeitem"]');
  const linkOf = (item) => item.querySelector(":scope > .node-row > .node-link");
  const labelOf = (item) => (item.querySelector(":scope > .node-row .label")?.textContent || "").trim().toLowerCase();
  const isSinglePane = () => window.matchMedia("(max-width: 48rem)").matches;

  // Scroll the outline (and only the outline) to show the item: just enough while the arrow
  // keys walk, to its middle when the page opens on it.
  function reveal(item, { middle = false } = {}) {
    const outline = item.closest(".outline");
    const row = item.querySelector(":scope > .node-row") || item;
    if (!outline) return;
    // The part of the outline on the screen (its foot may be below the window's).
    const whole = outline.getBoundingClientRect();
    const where = row.getBoundingClientRect();
    const seen = { top: Math.max(whole.top, 0), bottom: Math.min(whole.bottom, window.innerHeight) };
    const box = seen.bottom - seen.top > 3 * where.height ? { ...seen, height: seen.bottom - seen.top } : whole;
    const hidden = where.top < box.top || where.bottom > box.bottom;
    if (hidden && middle) outline.scrollTop += where.top - box.top - (box.height - where.height) / 2;
    else if (where.top < box.top) outline.scrollTop -= box.top - where.top + 8;
    else if (where.bottom > box.bottom) outline.scrollTop += where.bottom - box.bottom + 8;
  }

  function moveTo(item, { focus = true } = {}) {
    if (!item) return;
    const tree = treeOf(item);
    for (const other of tree.querySelectorAll('[role="treeitem"][tabindex="0"]')) other.tabIndex = -1;
    item.tabIndex = 0;
    if (focus) item.focus({ preventScroll: true });
    reveal(item);
  }

  function setOpen(item, open) {
    if (!item.hasAttribute("aria-expanded")) return;
    item.setAttribute("aria-expanded", String(open));
    if (open) closed.delete(item.id); else closed.add(item.id);
  }

  // Scroll the text box (not the window) so the highlighted node starts near its top.
  function showSelectedText() {
    const box = document.getElementById("document-text");
    if (!box) return;
    const mark = document.getElementById("selected-text");
    box.scrollTop = mark ? Math.max(0, mark.offsetTop - box.clientTop - 16) : 0;
  }

  // The server renders plain links; this makes the outline one Tab stop.
  function setUp(tree) {
    for (const item of itemsOf(tree)) {
      item.tabIndex = -1;
      const link = linkOf(item);
      if (link) link.tabIndex = -1;
      if (closed.has(item.id)) item.setAttribute("aria-expanded", "false");
    }
    const selected = tree.querySelector('[role="treeitem"][aria-selected="true"]');
    // A selected node deep inside a closed branch is shown: its ancestors open.
    for (let up = selected && parentItem(selected); up; up = parentItem(up)) setOpen(up, true);
    (selected || shownItems(tree)[0]).tabIndex = 0;
    setUpMoves(tree, selected);
    return selected;
  }

  document.addEventListener("DOMContentLoaded", () => {
    const tree = document.querySelector('.outline [role="tree"]');
    if (!tree) return;
    const selected = setUp(tree);
    if (selected) reveal(selected, { middle: true });
    showSelectedText();
  });

  // Back and Forward put a saved copy of the page back: give its outline its keys again.
  document.addEventListener("htmx:historyRestore", () => {
    const tree = document.querySelector('.outline [role="tree"]');
    if (!tree) return;
    const selected = setUp(tree);
    if (selected) reveal(selected, { middle: true });
    showSelectedText();
  });

  // A phone turned sideways (or a window resized) re-flows the text: the highlight stays in view.
  // Only a new width counts: a phone's address bar hiding on scroll changes the height alone.
  let width = window.innerWidth;
  window.addEventListener("resize", () => {
    if (window.innerWidth !== width) showSelectedText();
    width = window.innerWidth;
  });

  document.addEventListener("htmx:beforeSwap", (event) => {
    const outline = event.detail.target.querySelector?.(".outline");
    if (!outline) return;
    const source = event.detail.requestConfig?.elt;  // detail.elt is the target here
    kept = {
      scrollTop: outline.scrollTop,
      focusWasInside: event.detail.target.contains(document.activeElement) || document.activeElement === document.body,
      fromOutline: Boolean(source && source.closest && source.closest(".outline")),
    };
  });

  document.addEventListener("htmx:afterSwap", (event) => {
    const outline = event.detail.target.querySelector?.(".outline");
    const tree = outline && outline.querySelector('[role="tree"]');
    if (!tree) return;
    const selected = setUp(tree);
    if (kept) outline.scrollTop = kept.scrollTop;
    const current = selected || tree.querySelector('[role="treeitem"][tabindex="0"]');
    if (!kept || kept.focusWasInside) current.focus({ preventScroll: true });
    reveal(current, { middle: true });
    showSelectedText();
    // One column (a phone): a node tapped in the outline brings its text into view.
    if (kept && kept.fromOutline && selected && isSinglePane()) {
      const box = document.getElementById("document-text");
      if (box) window.scrollTo({ top: box.getBoundingClientRect().top + window.scrollY - 8 });
    }
    kept = null;
  });

  document.addEventListener("click", (event) => {
    const twisty = event.target.closest('[role="tree"] .twisty');
    if (twisty) {
      const item = twisty.closest('[role="treeitem"]');
      setOpen(item, item.getAttribute("aria-expanded") !== "true");
      moveTo(item);
      return;
    }
    // The whole row selects, not only the words of the link.
    const row = event.target.closest('[role="tree"] .node-row');
    if (row && !event.target.closest(".node-link")) linkOf(row.closest('[role="treeitem"]'))?.click();
  });

  // -- Moving a node: drag it onto a highlighted place, or from the keyboard Ctrl+X (Cmd+X) on
  // it, the arrow keys through the places, Enter to move it there, Escape to cancel. Its places
  // come from the server (GET /v1/api/nodes/{id}/move-places; the selected node's are in the page
  // already): the move's own rule, so every drop is one the move takes. A drop sends the outline's
  // move form, and the moved node comes back selected.
  let moving = null;  // the item being moved, while a drag or a keyboard move lasts
  let known = new Map();  // node id -> a promise of the ids of the items it can move into
  const say = (words) => { const live = document.getElementById("move-status"); if (live) live.textContent = words; };
  const placesIn = (tree) => itemsOf(tree).filter((item) => item.classList.contains("drop-target"));
  // The row under the pointer is a place only if its own node is one: a row inside a place's
  // subtree (a clause under a section the node may go into) is not that section.
  const placeAt = (node) => {
    const item = node && node.closest && node.closest(".node-row")?.closest('[role="treeitem"]');
    return item && item.classList.contains("drop-target") ? item : null;
  };
  const isRoot = (item) => !parentItem(item);

  function placesOf(item) {
    const tree = treeOf(item);
    if (!known.has(item.id)) {
      const url = tree.dataset.movePlaces.replace("/0/", `/${item.id.replace("node-", "")}/`);
      known.set(item.id, fetch(url, { headers: { Accept: "application/json" } })
        .then((answer) => (answer.ok ? answer.json() : { places: [] }))
        .then((body) => body.places.map((place) => `node-${place.parent}`))
        .catch(() => []));
    }
    return known.get(item.id);
  }

  // Marks the places (opening the branches they sit in); resolves to them, [] if none.
  function startMove(item) {
    const tree = treeOf(item);
    moving = item;
    tree.classList.add("moving");
    item.classList.add("move-source");
    return placesOf(item).then((ids) => {
      if (moving !== item) return [];
      const places = ids.map((id) => document.getElementById(id)).filter(Boolean);
      for (const place of places) {
        place.classList.add("drop-target");
        for (let up = parentItem(place); up; up = parentItem(up)) setOpen(up, true);
      }
      return places;
    });
  }

  function endMove() {
    if (!moving) return;
    const tree = treeOf(moving);
    if (tree) {
      tree.classList.remove("moving");
      for (const item of tree.querySelectorAll(".move-source, .drop-target, .drop-over")) {
        item.classList.remove("move-source", "drop-target", "drop-over");
      }
    }
    moving = null;
  }

  function dropOn(place) {
    const form = document.getElementById("outline-move");
    if (!form || !moving) return endMove();
    form.elements.node.value = moving.id.replace("node-", "");
    form.elements.parent.value = place.id.replace("node-", "");
    say(`Moving “${labelOf(moving)}” into “${labelOf(place)}”.`);
    endMove();
    form.requestSubmit();
  }

  function setUpMoves(tree, selected) {
    known = new Map();  // the tree changed: every node's places may have too
    if (selected) {
      const ids = itemsOf(tree).filter((item) => item.hasAttribute("data-drop-target")).map((item) => item.id);
      known.set(selected.id, Promise.resolve(ids));
    }
    for (const item of itemsOf(tree)) {
      if (isRoot(item)) continue;
      item.querySelector(":scope > .node-row").draggable = true;
      linkOf(item).draggable = false;  // the row is dragged, not the link's address
    }
  }

  // Asked for as the pointer goes down, so the places are there by the time the drag starts.
  document.addEventListener("pointerdown", (event) => {
    const item = event.target.closest && event.target.closest('.outline [role="treeitem"]');
    if (item && !isRoot(item)) placesOf(item);
  });
  document.addEventListener("dragstart", (event) => {
    const row = event.target.closest && event.target.closest(".outline .node-row");
    const item = row && row.closest('[role="treeitem"]');
    if (!item || isRoot(item)) return;
    event.dataTransfer.effectAllowed = "move";
    event.dataTransfer.setData("text/plain", labelOf(item));
    startMove(item);
  });
  document.addEventListener("dragover", (event) => {
    if (!moving) return;
    const place = placeAt(event.target);
    for (const other of treeOf(moving).querySelectorAll(".drop-over")) if (other !== place) other.classList.remove("drop-over");
    if (!place) return;  // not a place: no drop here, nothing marked
    event.preventDefault();
    event.dataTransfer.dropEffect = "move";
    place.classList.add("drop-over");
  });
  document.addEventListener("drop", (event) => {
    const place = moving && placeAt(event.target);
    if (!place) return;
    event.preventDefault();
    dropOn(place);
  });
  document.addEventListener("dragend", () => endMove());
  // A keyboard move ends when the focus leaves the outline (a click elsewhere, or Tab).
  document.addEventListener("focusout", (event) => {
    if (moving && !event.relatedTarget?.closest?.('[role="tree"]')) endMove();
  });

  // Registered before the tree's own keys: while a move lasts, the keys are the move's.
  document.addEventListener("keydown", (event) => {
    const item = event.target.closest && event.target.closest('[role="treeitem"]');
    if (!item || event.target !== item) return;
    const cut = (event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "x";
    if (!moving && cut) {
      event.preventDefault();
      if (isRoot(item)) return say("The root cannot move: it is the whole document.");
      startMove(item).then((places) => {
        if (moving !== item) return;
        if (!places.length) {
          endMove();
          return say(`“${labelOf(item)}” has no other place that keeps the text in order.`);
        }
        moveTo(places[0]);
        say(`Moving “${labelOf(item)}”: ${places.length} place${places.length === 1 ? "" : "s"} it can go, highlighted. ` +
          "Up and Down go through them, Enter moves it there, Escape cancels.");
      });
      return;
    }
    if (!moving) return;
    const places = placesIn(treeOf(item));
    const at = places.indexOf(item);
    const paste = (event.ctrlKey || event.metaKey) && event.key.toLowerCase() === "v";
    if (event.key === "Escape") {
      const source = moving;
      endMove();
      moveTo(source);
      say("Move cancelled.");
    } else if (event.key === "Tab") {
      endMove();
      return;  // Tab leaves the tree as usual
    } else if (event.key === "ArrowDown") moveTo(places[Math.min(at + 1, places.length - 1)]);
    else if (event.key === "ArrowUp") moveTo(places[Math.max(at - 1, 0)]);
    else if (event.key === "Home") moveTo(places[0]);
    else if (event.key === "End") moveTo(places[places.length - 1]);
    else if ((event.key === "Enter" || paste) && at >= 0) dropOn(item);
    event.preventDefault();
    event.stopImmediatePropagation();
  });

  document.addEventListener("keydown", (event) => {
    const item = event.target.closest && event.target.closest('[role="treeitem"]');
    if (!item || event.target !== item || event.altKey || event.ctrlKey || event.metaKey) return;
    const tree = treeOf(item);
    const shown = shownItems(tree);
    const at = shown.indexOf(item);
    const branch = item.hasAttribute("aria-expanded");
    const open = item.getAttribute("aria-expanded") === "true";
    switch (event.key) {
      case "ArrowDown": moveTo(shown[at + 1]); break;
      case "ArrowUp": moveTo(shown[at - 1]); break;
      case "Home": moveTo(shown[0]); break;
      case "End": moveTo(shown[shown.length - 1]); break;
      case "ArrowRight":
        if (branch && !open) setOpen(item, true);
        else if (branch) moveTo(item.querySelector('[role="treeitem"]'));
        break;
      case "ArrowLeft":
        if (branch && open) setOpen(item, false);
        else moveTo(parentItem(item));
        break;
      case "Enter": case " ": linkOf(item)?.click(); break;
      case "*":
        for (const sibling of item.parentElement.children) setOpen(sibling, true);
        break;
      default: {
        if (event.key.length !== 1 || !event.key.trim()) return;
        const now = Date.now();
        typed = (now - typedAt > 700 ? "" : typed) + event.key.toLowerCase();
        typedAt = now;
        // A first letter (or the same letter again) goes to the next match, wrapping round;
        // more letters typed quickly narrow the match from the current item on.
        const next = [...shown.slice(at + 1), ...shown.slice(0, at + 1)];
        const stepping = [...typed].every((c) => c === typed[0]);
        const prefix = stepping ? typed[0] : typed;
        moveTo((stepping ? next : [item, ...next]).find((candidate) => labelOf(candidate).startsWith(prefix)));
      }
    }
    event.preventDefault();
  });
})();
