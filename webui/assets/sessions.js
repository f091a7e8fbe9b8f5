// Sessions: the session the page has open, its event stream, and the
// panel that lists the person's sessions to resume or start anew.

import { $, el, randomKey } from './dom.js';
import { api, signedIn } from './api.js';
import { stream } from './stream.js';
import * as conversation from './conversation.js';
import * as confirm from './confirm.js';
import { loadCommands, modeName, resetSession, setSnapshot } from './mode.js';
import { enableComposer } from './turns.js';
import { inboxServed } from './inbox.js';
import { closePanel, openPanel } from './panel.js';
import { signOut } from './signin.js';

let current = ''; // the open session's id
let stopStream = null; // stops its event stream

// sessionId is the open session's id ('' before one opens).
export const sessionId = () => current;

// newSession starts a session and opens it.
export async function newSession() {
  const s = await api('POST', '/v1/sessions', { ui: true }, { 'Idempotency-Key': randomKey() });
  await openSession(s.session_id);
}

// openSession opens a session: the conversation is drawn from its newest
// page of history, then follows its event stream.
export async function openSession(id) {
  closePanel();
  if (stopStream) stopStream();
  current = id;
  conversation.reset();
  confirm.reset();
  resetSession();
  localStorage.setItem('agentplane.session', id);
  history.replaceState(null, '', '#s=' + encodeURIComponent(id));
  const sid = encodeURIComponent(id);
  // the session fitted to the configuration (a mode that is gone is
  // replaced, and the resume record's event says so: in this page, or on
  // the stream that follows it), the newest page of events and the
  // commands at once; earlier events are read when the person scrolls up
  // to them
  const [resumed, page] = await Promise.all([
    api('POST', `/v1/sessions/${sid}/resume`, {}),
    api('GET', `/v1/sessions/${sid}/history?limit=${conversation.PAGE}`),
    loadCommands(),
  ]);
  setSnapshot(resumed.snapshot); // after the commands: a mode other than theirs loads them again
  conversation.drawPage(page, false);
  if (!page.more_before && !page.events.some((e) => e.kind === 'turn')) conversation.showHint();
  stopStream = stream(`/v1/sessions/${sid}/events?inbox=${inboxServed() ? 'true' : 'false'}`, {
    name: 'session',
    after: conversation.newest,
    onEvent: conversation.onSessionEvent,
    onOpen: conversation.streamRestarted, // a reconnect: deltas of a reply still streaming resume from the record
  });
  enableComposer();
}

async function showSessions() {
  let list = [];
  try {
    list = (await api('GET', '/v1/sessions?limit=50')).sessions;
  } catch (e) {
    openPanel('sessions', 'Sessions', el('p', { class: 'error', text: e.message }));
    return;
  }
  const ul = el('ul', { class: 'items' });
  for (const s of list) {
    const awc = s.snapshot.awc && s.snapshot.awc.entity_header;
    const here = s.session_id === current;
    ul.append(
      el(
        'li',
        {},
        el('button', { type: 'button', text: here ? 'Current' : 'Open', disabled: here, onclick: () => openSession(s.session_id) }),
        el('span', { text: ` ${new Date(s.created_at).toLocaleString()} · ${modeName(s.snapshot.mode)}${awc ? ' · ' + (awc.display_name || awc.id) : ''}` }),
      ),
    );
  }
  const actions = el('div', { class: 'actions' });
  if (signedIn()) actions.append(el('button', { type: 'button', text: 'Sign out', onclick: signOut }));
  actions.append(el('button', { type: 'button', class: 'primary', text: 'New session', onclick: () => newSession() }));
  openPanel('sessions', 'Sessions', list.length ? ul : el('p', { class: 'muted', text: 'No sessions yet.' }), actions);
}

$('open-sessions').addEventListener('click', showSessions);
