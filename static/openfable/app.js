// Drop .txt / .md files onto an upload form: they go into its file input, as if chosen.
document.addEventListener("DOMContentLoaded", () => {
  document.body.addEventListener("dragover", (event) => {
    const zone = event.target.closest("[data-dropzone]");
    if (zone) { event.preventDefault(); zone.classList.add("dropping"); }
  });
  document.body.addEventListener("dragleave", (event) => {
    const zone = event.target.closest("[data-dropzone]");
    if (zone) zone.classList.remove("dropping");
  });
  document.body.addEventListener("drop", (event) => {
    const zone = event.target.closest("[data-dropzone]");
    const input = zone && zone.querySelector("input[type=file]");
    if (!input || !event.dataTransfer.files.length) return;
    event.preventDefault();
    zone.classList.remove("dropping");
    input.files = event.dataTransfer.files;
    input.dispatchEvent(new Event("change", { bubbles: true }));
  });
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
