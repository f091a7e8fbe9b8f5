// The mode and the work context: the session's snapshot as last seen, the
// configured modes and the open mode's commands, shown in the mode
// switcher and the work context's side panel.

import { $, el, focusComposer } from './dom.js';
import { api } from './api.js';
import { hintShown, rememberName, showHint, syncConfirmButtons } from './conversation.js';
import { sendTurn } from './turns.js';
import { sessionId } from './sessions.js';

let snap = null; // the session's snapshot, the newest seen
let modes = [];
let commandList = []; // the commands of the mode loaded
let commandsMode = ''; // the mode they are of
let entityTypes = {}; // entity type -> display name
let commandNames = {}; // command id -> display name, of every mode (a launcher's picker runs a command of its target mode)
const menu = { active: -1 }; // the mode list's active option

// resetSession forgets the snapshot and commands, for another session.
export function resetSession() {
  snap = null;
  commandsMode = '';
}

// snapshot is the session's snapshot, the newest seen (or null).
export const snapshot = () => snap;

// commands are the open mode's commands.
export const commands = () => commandList;

// modeName is how a mode is shown.
export function modeName(key) {
  const m = modes.find((x) => x.key === key);
  return m ? m.displayName : key || '?';
}

// commandName is how a command is shown, whatever mode it is of.
export function commandName(id) {
  const c = commandList.find((x) => x.id === id);
  return c ? c.display_name : commandNames[id] || id;
}

// setSnapshot shows a snapshot of the session unless a newer one is shown.
export function setSnapshot(s) {
  if (!s || (snap && s.session_id === snap.session_id && s.version < snap.version)) return;
  snap = s;
  showMode();
  renderContext();
  syncConfirmButtons();
  if (s.mode !== commandsMode) loadCommands();
}

// refreshSnapshot reads the session's snapshot again.
export async function refreshSnapshot() {
  let s;
  try {
    s = await api('GET', `/v1/sessions/${encodeURIComponent(sessionId())}`);
  } catch {
    return; // the stream brings it
  }
  setSnapshot(s);
}

// loadCommands reads the commands of the session's mode.
export async function loadCommands() {
  commandsMode = snap && snap.mode;
  try {
    const l = await api('GET', `/v1/sessions/${encodeURIComponent(sessionId())}/commands`);
    commandList = l.commands;
    commandsMode = l.mode;
    entityTypes = l.entity_types || {};
    commandNames = l.command_names || {};
  } catch {
    commandsMode = '';
  }
  $('mode').disabled = !commandList.some((c) => c.sets_session_mode);
  renderContext();
  if (hintShown()) showHint(); // the examples of the mode now active
}

// typeName is how an entity type is shown: its configured name, else its key.
const typeName = (key) => entityTypes[key] || (key || '').replaceAll('_', ' ');

function renderContext() {
  const box = $('awc');
  const awc = (snap && snap.awc) || {};
  const clear = $('awc-clear');
  if (!awc.entity_header) {
    box.replaceChildren(el('p', { class: 'muted', text: 'Nothing is open.' }));
    clear.hidden = true;
    return;
  }
  const h = awc.entity_header;
  const parts = [
    el('p', {}, el('strong', { text: h.display_name || h.id }), el('br'), el('span', { class: 'muted', text: `${typeName(awc.entity_type)} · ${h.id}` })),
  ];
  if (awc.related_entities && awc.related_entities.length) {
    parts.push(el('h3', { class: 'muted', text: 'Related' }));
    parts.push(
      el(
        'ul',
        {},
        ...awc.related_entities.map((r) => el('li', { text: `${r.header.display_name || r.header.id} (${[r.role, typeName(r.entity_type)].filter(Boolean).join(', ')})` })),
      ),
    );
  }
  box.replaceChildren(...parts);
  clear.hidden = !clearCommand();
}

// clearCommand is the active command that clears the work context for
// the open entity's catalog.
function clearCommand() {
  const awc = (snap && snap.awc) || {};
  const setter = commandList.filter((c) => c.sets_active_context && c.active_entity_type === awc.entity_type).map((c) => c.catalog_id);
  return commandList.find((c) => c.clears_active_context && setter.includes(c.catalog_id));
}

$('awc-clear').addEventListener('click', () => {
  const c = clearCommand();
  const awc = snap.awc;
  focusComposer(); // the button hides when the context clears: the focus must not go with it
  if (c && awc.entity_header) sendTurn({ selection: { command_id: c.id, id: awc.entity_header.id } }).catch(() => {});
});

// The mode switcher is a button that opens a list of the modes (a
// popover: a click elsewhere or Escape closes it), used alike with the
// mouse and with keys: arrows move, Enter or a click chooses.

function showMode() {
  const key = (snap && snap.mode) || '';
  $('mode').dataset.value = key;
  $('mode-name').textContent = key ? modeName(key) : '…';
}

function modeActivate(i) {
  const list = $('mode-list');
  const n = list.children.length;
  if (!n) return;
  menu.active = Math.max(0, Math.min(n - 1, i));
  for (const [j, o] of [...list.children].entries()) o.setAttribute('aria-selected', String(j === menu.active));
  list.setAttribute('aria-activedescendant', list.children[menu.active].id);
}

function openModes() {
  const list = $('mode-list');
  const r = $('mode').getBoundingClientRect();
  list.style.left = Math.max(4, Math.min(r.left, innerWidth - 200)) + 'px';
  list.style.top = r.bottom + 4 + 'px';
  list.showPopover();
  modeActivate(modes.findIndex((m) => m.key === $('mode').dataset.value));
  list.focus();
}

function chooseMode(i) {
  const m = modes[i];
  $('mode-list').hidePopover();
  focusComposer();
  const c = commandList.find((x) => x.sets_session_mode);
  if (!m || !c || m.key === $('mode').dataset.value) return;
  rememberName(m.key, modeName(m.key));
  sendTurn({ selection: { command_id: c.id, id: m.key } }).catch(() => {}); // the answer's snapshot shows the mode, refused or not
}

$('mode').addEventListener('click', () => ($('mode-list').matches(':popover-open') ? $('mode-list').hidePopover() : openModes()));
$('mode').addEventListener('keydown', (ev) => {
  if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
    ev.preventDefault();
    openModes();
  }
});
$('mode-list').addEventListener('toggle', (ev) => {
  $('mode').setAttribute('aria-expanded', String(ev.newState === 'open'));
  if (ev.newState === 'closed' && (document.activeElement === document.body || document.activeElement === $('mode-list'))) $('mode').focus(); // Escape
});
$('mode-list').addEventListener('keydown', (ev) => {
  const moves = { ArrowDown: 1, ArrowUp: -1 };
  if (ev.key in moves) modeActivate(menu.active + moves[ev.key]);
  else if (ev.key === 'Home' || ev.key === 'End') modeActivate(ev.key === 'Home' ? 0 : modes.length - 1);
  else if (ev.key === 'Enter' || ev.key === ' ') chooseMode(menu.active);
  else if (ev.key === 'Tab') $('mode-list').hidePopover();
  else return;
  ev.preventDefault();
});
// the press does not take the focus from the list (nor leave a caret behind)
$('mode-list').addEventListener('mousedown', (ev) => ev.preventDefault());

// loadModes reads the configured modes into the switcher.
export async function loadModes() {
  try {
    const m = await api('GET', '/v1/modes');
    modes = m.modes || [];
  } catch {
    modes = [];
  }
  $('mode-list').replaceChildren(
    ...modes.map((m, i) =>
      el('li', { role: 'option', id: 'mode-' + i, 'data-key': m.key, 'aria-selected': 'false', text: m.displayName || m.key, onclick: () => chooseMode(i), onmousemove: () => modeActivate(i) }),
    ),
  );
  showMode();
}
