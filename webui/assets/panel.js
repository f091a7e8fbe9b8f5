// The panel: one dialog that shows the inbox, the workflows, the audit
// trail or the sessions, one at a time. It owns what it shows; what a
// section runs while shown (a workflow's event stream) is stopped by the
// section's close hook.

import { $, backToComposer, closeDialog, openModal } from './dom.js';

let kind = ''; // what the panel shows, '' when closed
const closers = []; // the sections' close hooks

// openPanel shows kind in the panel, opening it if closed.
export function openPanel(k, title, ...body) {
  kind = k;
  $('panel-title').textContent = title;
  $('panel-body').replaceChildren(...body);
  if (!$('panel').open) openModal($('panel'));
}

// panelShows reports whether the panel is open on kind.
export const panelShows = (k) => kind === k;

// onPanelClose adds what a section does when the panel closes.
export function onPanelClose(fn) {
  closers.push(fn);
}

// closePanel closes the panel if it is open.
export function closePanel() {
  if ($('panel').open) closeDialog($('panel'));
}

$('panel-close').addEventListener('click', () => closeDialog($('panel')));
$('panel').addEventListener('close', (ev) => {
  kind = '';
  for (const fn of closers) fn();
  backToComposer(ev);
});
