// The page's elements and dialogs: looking elements up, building them,
// and the focus rules every dialog follows. It holds no state.

export const $ = (id) => document.getElementById(id);

// el builds an element: attributes (class, text as textContent, on…
// as listeners) and children. Text is only ever set as textContent.
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children) if (c) e.append(c);
  return e;
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// randomKey is an Idempotency-Key: 16 random bytes in hex.
export function randomKey() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// focusComposer puts the focus and the caret in the message box. A
// dialog closed by a mouse click has already given the focus back to the
// box, but the click's own handling left the document's caret where the
// pointer was (a focus() on a focused element does not move it), so keys
// would reach the box and type nothing: the caret is set explicitly.
export function focusComposer() {
  const box = $('composer-text');
  box.focus();
  const end = box.value.length;
  box.setSelectionRange(end, end);
}

// backToComposer is a dialog's close event: the focus goes back to the
// message box, unless the person has already put it somewhere else (the
// event comes a moment after the dialog closed: a key or click meanwhile
// must keep its place).
export function backToComposer(ev) {
  const a = document.activeElement;
  const restored = ev && ev.target.opener; // where closing put the focus back
  if (!a || a === document.body || a === restored || a === $('composer-text') || a.closest('dialog:not([open])')) focusComposer();
}

// openModal opens a dialog, noting what had the focus: closing it gives
// the focus back there, and its close event moves it on to the box.
export function openModal(d) {
  d.opener = document.activeElement;
  d.showModal();
}

// closeDialog closes a dialog and gives the message box the focus and the
// caret at once: a key pressed right after the click that closed it
// reaches the box (the dialog's close event comes a moment later).
export function closeDialog(d) {
  d.close();
  focusComposer();
}
