// The picker: a dialog that lists a catalog's (or a provider's) items as
// the person types, chosen by keys or the mouse. It owns the decision it
// answers, the items listed and the one active.

import { $, closeDialog, el, openModal, backToComposer } from './dom.js';
import { api } from './api.js';
import { answer, isLive, newestGroup, rememberName } from './conversation.js';
import { commandName } from './mode.js';
import { sendTurn } from './turns.js';
import { sessionId } from './sessions.js';

const picker = { d: null, box: null, items: [], active: -1, timer: 0, serial: 0 };

// openPicker opens the picker of a decision; box is the conversation's
// Choose… group it answers, when opened from there.
export async function openPicker(d, box = null) {
  picker.d = d;
  picker.box = box || newestGroup();
  $('picker-title').textContent = commandName(d.command_id);
  const q = $('picker-q');
  q.value = d.prefilter_text || '';
  $('picker-list').replaceChildren();
  $('picker-note').textContent = '';
  if (!$('picker').open) openModal($('picker'));
  q.focus();
  await searchPicker(q.value, d.highlight_id);
}

async function searchPicker(text, highlight) {
  const d = picker.d;
  const serial = ++picker.serial;
  const note = $('picker-note');
  const source = d.catalog_id ? `catalogs/${encodeURIComponent(d.catalog_id)}` : `providers/${encodeURIComponent(d.provider_id || '')}`;
  // a launcher's picker lists its catalog as its target mode sees it
  const mode = d.target_mode ? `&mode=${encodeURIComponent(d.target_mode)}` : '';
  let m;
  try {
    const path = `/v1/sessions/${encodeURIComponent(sessionId())}/${source}/items?limit=20&q=${encodeURIComponent(text)}${mode}`;
    m = await api('GET', path);
  } catch (e) {
    if (serial === picker.serial) note.textContent = e.message;
    return;
  }
  if (serial !== picker.serial) return; // a newer search answered first
  picker.items = m.items;
  const list = $('picker-list');
  list.replaceChildren(
    ...m.items.map((it, i) =>
      el(
        'li',
        { role: 'option', id: 'opt-' + i, 'data-id': it.id, 'aria-selected': 'false', onclick: () => choose(i), onmousemove: () => activate(i) },
        it.display_name,
        el('small', { text: it.id + (it.description ? ' · ' + it.description : '') }),
      ),
    ),
  );
  note.textContent = m.items.length ? `${m.items.length} item${m.items.length > 1 ? 's' : ''}` : `Nothing matches “${text}”.`;
  let at = highlight ? m.items.findIndex((it) => it.id === highlight) : -1;
  activate(at >= 0 ? at : m.items.length ? 0 : -1);
}

function activate(i) {
  const list = $('picker-list');
  const q = $('picker-q');
  picker.active = i;
  for (const o of list.children) o.setAttribute('aria-selected', 'false');
  if (i < 0) {
    q.removeAttribute('aria-activedescendant');
    return;
  }
  const o = list.children[i];
  o.setAttribute('aria-selected', 'true');
  q.setAttribute('aria-activedescendant', o.id);
  o.scrollIntoView({ block: 'nearest' });
}

function choose(i) {
  const it = picker.items[i];
  if (!it) return;
  closeDialog($('picker'));
  rememberName(it.id, it.display_name);
  const box = picker.box;
  const send = () => sendTurn({ selection: { command_id: picker.d.command_id, id: it.id } });
  if (box && isLive(box)) answer(box, send);
  else send().catch(() => {});
}

$('picker-q').addEventListener('input', (ev) => {
  clearTimeout(picker.timer);
  picker.timer = setTimeout(() => searchPicker(ev.target.value), 120);
});
$('picker-q').addEventListener('keydown', (ev) => {
  const n = picker.items.length;
  const moves = { ArrowDown: 1, ArrowUp: -1, PageDown: 5, PageUp: -5 };
  if (ev.key in moves && n) {
    ev.preventDefault();
    activate(Math.max(0, Math.min(n - 1, (picker.active < 0 ? 0 : picker.active) + moves[ev.key])));
  } else if ((ev.key === 'Home' || ev.key === 'End') && ev.ctrlKey && n) {
    ev.preventDefault();
    activate(ev.key === 'Home' ? 0 : n - 1);
  } else if (ev.key === 'Enter') {
    ev.preventDefault();
    choose(picker.active);
  }
});
$('picker-list').addEventListener('mousedown', (ev) => ev.preventDefault()); // the filter keeps the focus
$('picker-cancel').addEventListener('click', () => closeDialog($('picker')));
$('picker').addEventListener('close', backToComposer);
