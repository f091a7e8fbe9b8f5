// The conversation: every message is drawn from the session's event
// stream (ids are the audit chain's sequence numbers), so a page that
// reloads, or reconnects after the server restarted, shows each event
// once. It owns what is drawn of the open session — the events' range,
// the LLM's answer while it streams, and the groups of controls that may
// still answer — and the names of items the person chose.

import { $, el, focusComposer } from './dom.js';
import { api } from './api.js';
import { render as markdown } from './markdown.js';
import { commandName, commands, modeName, setSnapshot, snapshot } from './mode.js';
import { sendTurn } from './turns.js';
import { openPicker } from './picker.js';
import { decline, openConfirm, takeAnsweredEarly } from './confirm.js';
import { onNotification } from './inbox.js';
import { sessionId } from './sessions.js';

// PAGE is how many events a page of history holds: the newest page is
// drawn when a session opens, earlier ones as the person scrolls up.
export const PAGE = 100;

let lastSeq = 0; // the newest event drawn
let firstSeq = 0; // the earliest event drawn
let moreBefore = false; // earlier events are not drawn yet
let earlier = null; // the load of an earlier page, while it runs
let batch = null; // a fragment that events are drawn into (a page of history), else null
let older = false; // the page being drawn is earlier history (its questions were answered since)
let streaming = null; // the LLM's bubble while its text streams
let llmFailed = 0; // the seq of the last LLM exchange that failed
const names = new Map(); // item id -> display name, learned from pickers

// reset empties the conversation for another session.
export function reset() {
  lastSeq = 0;
  firstSeq = 0;
  moreBefore = false;
  earlier = null;
  streaming = null;
  live.length = 0;
  $('log').replaceChildren();
}

// newest is the seq of the newest event drawn: a stream resumes after it.
export const newest = () => lastSeq;

// llmFailedAt is the seq of the last LLM exchange whose record said it failed.
export const llmFailedAt = () => llmFailed;

// rememberName notes an item's display name, for drawing the turn that chose it.
export function rememberName(id, name) {
  names.set(id, name);
}

// streamRestarted forgets the LLM's streaming bubble: after a reconnect
// the deltas of a reply still streaming resume from its record.
export function streamRestarted() {
  streaming = null;
}

// append adds a line to the conversation (or to the page of history being
// drawn), following it when the person was at the end.
function append(node) {
  if (batch) {
    batch.append(node);
    return node;
  }
  const log = $('log');
  const atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  log.append(node);
  if (atEnd) log.scrollTop = log.scrollHeight;
  return node;
}

// line adds a line of text to the conversation.
export function line(text, cls = 'msg-sys', seq) {
  return append(el('li', { class: cls, text, 'data-seq': seq }));
}

function why(trace) {
  if (!trace || !trace.length) return null;
  const ol = el('ol');
  for (const t of trace) ol.append(el('li', { text: t }));
  return el('details', { class: 'why' }, el('summary', { text: 'Why' }), ol);
}

function resultLine(r, seq) {
  if (!r || r.status === 'none') return null;
  if (r.status === 'success') return line('✓ ' + (r.message || r.tool + ' done'), 'msg-sys ok', seq);
  if (r.status === 'confirmation_required') return null;
  const detail = (r.error && (r.error.detail || r.error.message)) || r.message || r.status;
  return line('✕ ' + detail, 'msg-sys bad', seq);
}

// drawFailed says in the conversation that an event could not be drawn,
// and logs why (with the event, for whoever opens the console): the
// person sees that something is missing, and the rest is drawn as usual.
function drawFailed(seq, kind, err) {
  console.error(`agentplane: event #${seq}${kind ? ` (${kind})` : ''} could not be drawn:`, err);
  const why = (err && err.message) || String(err);
  line(`⚠ Event #${seq}${kind ? ` (${kind})` : ''} could not be shown: ${why}`, 'msg-sys bad draw-error', seq);
}

// draw draws one event, or says that it could not.
function draw(e) {
  try {
    render(e);
  } catch (err) {
    drawFailed(e && e.seq, e && e.kind, err);
  }
}

// render draws one event of the session's stream; it throws on an event
// it cannot read.
function render(e) {
  const seq = e.seq;
  switch (e.kind) {
    case 'open':
      line(`Session started in ${modeName(e.snapshot && e.snapshot.mode)} mode.`, 'msg-sys', seq);
      break;
    case 'resume':
      // what had to change to fit the configuration, said to the person
      line(e.notes && e.notes.length ? `Session resumed: ${e.notes.join('; ')}.` : 'Session resumed.', 'msg-sys', seq);
      break;
    case 'turn':
      renderTurn(e);
      break;
    case 'execution': {
      const origin = (e.intent && e.intent.origin) || '';
      const r = e.result;
      if (!r) break;
      if (origin === 'user' || origin === 'api') resultLine(r, seq);
      else if (r.status !== 'confirmation_required') {
        const ok = r.status === 'success';
        const detail = ok ? r.message : (r.error && (r.error.detail || r.error.message)) || r.status;
        line(`↳ ${r.tool || (e.intent && e.intent.action)} (${origin}): ${detail}`, 'msg-sys' + (ok ? '' : ' bad'), seq);
      }
      break;
    }
    case 'llm': {
      const x = e.llm || {};
      if (x.internal) break;
      const text = x.response && x.response.text;
      if (text) {
        const b = streaming || append(el('li', { class: 'msg-llm' }));
        b.classList.remove('streaming');
        b.removeAttribute('aria-busy');
        b.replaceChildren(markdown(text)); // streamed as plain text; the whole answer as Markdown
        b.dataset.seq = seq;
        streaming = null;
      }
      if (x.error) {
        line('The LLM gave no answer: ' + x.error, 'msg-sys bad', seq);
        llmFailed = seq;
      }
      break;
    }
    case 'proposal': {
      const pc = e.snapshot && e.snapshot.pending_confirmation;
      if (pc) confirmEntry(pc.question, seq);
      break;
    }
    case 'notice': {
      const n = e.notice || {};
      const li = append(el('li', { class: 'pill' + (n.urgency === 'HIGH' ? ' high' : ''), role: 'note', 'data-seq': seq }));
      li.append(el('strong', { text: n.title || '' }));
      if (n.body) li.append(' — ', n.body);
      break;
    }
    default: // a kind this page does not know (a newer server): said, not skipped in silence
      throw new Error(`this page does not know records of kind “${e.kind}”`);
  }
}

function renderTurn(e) {
  const seq = e.seq;
  const input = e.input || {};
  retire(); // a new turn answers (or passes over) every earlier question
  hideHint();
  if (input.selection) {
    const s = input.selection;
    const c = commands().find((x) => x.id === s.command_id);
    const name = names.get(s.id) || (c && c.sets_session_mode ? modeName(s.id) : s.id); // a reload knows the modes' names
    line(`${commandName(s.command_id)}: ${name}`, 'msg-user', seq);
  } else if (input.text) {
    line(input.text, 'msg-user', seq);
  }
  const d = e.decision || {};
  let li;
  switch (d.action) {
    case 'invoke_command':
      if (e.result && e.result.status !== 'none' && e.result.status !== 'confirmation_required') li = resultLine(e.result, seq);
      else li = line(`Running ${commandName(d.command_id)}…`, 'msg-sys', seq);
      break;
    case 'open_picker':
      li = line(`${commandName(d.command_id)}: choose an item${d.prefilter_text ? ` matching “${d.prefilter_text}”` : ''}.`, 'msg-sys', seq);
      li.append(choices(el('button', { type: 'button', text: 'Choose…', onclick: (ev) => openPicker(d, ev.target.parentElement) })));
      break;
    case 'ask_clarifying_question':
      if ((d.command_id && d.resolved_id) || d.tool) {
        if (!d.option_ids || !d.option_ids.length) {
          li = confirmEntry(d.question_text, seq);
          break;
        }
      }
      li = line(d.question_text, 'msg-sys', seq);
      li.append(optionButtons(d));
      break;
    case 'continue_with_llm':
      li =
        d.reason_code === 'confirmation_declined'
          ? line('Cancelled; nothing was done.', 'msg-sys', seq)
          : line(`→ the assistant (${(d.reason_code || 'no_control_intent').replaceAll('_', ' ')})`, 'msg-sys', seq);
      break;
  }
  if (li) {
    const w = why(d.trace);
    if (w) li.append(w);
  }
}

// The controls in the conversation (option buttons, Choose…, Confirm…)
// answer the newest question only. A group is disabled the moment one of
// its buttons answers, and every group is retired by the next turn — the
// same whether the events arrive live or are drawn again after a reload,
// so an answered control never comes back.
const live = []; // groups that may still answer, oldest first

function choices(...buttons) {
  const box = el('div', { class: 'choices' }, ...buttons);
  if (!older) live.push(box);
  else answered(box); // a page of earlier history: all answered since
  return box;
}

// answered disables a group of controls: it answers no more.
export function answered(box) {
  if (!box) return;
  for (const b of box.querySelectorAll('button')) b.disabled = true;
  const i = live.indexOf(box);
  if (i >= 0) live.splice(i, 1);
}

function retire() {
  while (live.length) {
    const box = live[live.length - 1];
    box.dataset.retired = 'true';
    answered(box);
  }
}

// answer disables a group at once and sends its answer; a group whose
// answer could not be sent can answer again.
export function answer(box, send) {
  answered(box);
  send().catch(() => {
    if (!box.isConnected || box.dataset.retired) return; // a newer turn passed over it
    for (const b of box.querySelectorAll('button')) b.disabled = false;
    live.push(box);
  });
}

// isLive reports whether a group may still answer.
export const isLive = (box) => live.includes(box);

// newestGroup is the newest group that may still answer, or null.
export const newestGroup = () => (live.length ? live[live.length - 1] : null);

// confirmGroup is the live group of a confirmation question, or null.
export const confirmGroup = () => live.find((b) => b.classList.contains('confirm-choices')) || null;

function optionButtons(d) {
  const box = choices();
  (d.options || []).forEach((label, i) => {
    const id = d.option_ids && d.option_ids[i];
    box.append(
      el('button', {
        type: 'button',
        text: label,
        onclick: () => {
          if (id) names.set(id, label);
          answer(box, () => sendTurn(id ? { selection: { command_id: d.command_id, id } } : { text: label }));
          focusComposer();
        },
      }),
    );
  });
  return box;
}

// confirmEntry is a confirmation question in the conversation: its
// buttons stay live while the session waits for the answer.
function confirmEntry(question, seq) {
  const li = line(question, 'msg-sys', seq);
  const box = choices(
    el('button', { type: 'button', class: 'primary', text: 'Confirm…', onclick: () => openConfirm(question, box) }),
    el('button', { type: 'button', text: 'Cancel', onclick: () => decline(box) }),
  );
  box.classList.add('confirm-choices');
  li.append(box);
  if (takeAnsweredEarly()) answered(box); // the dialog was answered before this line came: it is drawn answered
  return li;
}

// syncConfirmButtons retires the confirmation's buttons once the session
// no longer waits for it (answered here, in another tab, or expired).
export function syncConfirmButtons() {
  const s = snapshot();
  if (s && s.pending_confirmation) return;
  for (const box of live.filter((b) => b.classList.contains('confirm-choices'))) answered(box);
}

function streamText(delta) {
  if (!streaming) streaming = append(el('li', { class: 'msg-llm streaming', 'aria-busy': 'true' }));
  streaming.textContent += delta;
  const log = $('log');
  log.scrollTop = log.scrollHeight;
}

// onSessionEvent is an event of the session's stream: a record to draw,
// a delta of the LLM's answer, or a notification for the inbox.
export function onSessionEvent(ev) {
  if (ev.event === 'notification') {
    onNotification(JSON.parse(ev.data));
    return;
  }
  if (ev.event === 'llm_delta') {
    try {
      streamText(JSON.parse(ev.data).text || '');
    } catch (err) {
      console.error('agentplane: a delta of the LLM\'s answer could not be read (the whole answer comes with its record):', err);
    }
    return;
  }
  const seq = Number(ev.id);
  if (!seq || seq <= lastSeq) return; // shown already
  lastSeq = seq;
  let e;
  try {
    e = JSON.parse(ev.data);
  } catch (err) {
    drawFailed(seq, '', err);
    return;
  }
  draw(e);
  if (e && e.snapshot) setSnapshot(e.snapshot);
  syncConfirmButtons();
  if (!firstSeq) firstSeq = seq;
}

// drawPage draws a page of history: the newest when a session opens
// (earlier = false), or one before what is drawn. Each event is drawn
// once, into a fragment put in place in one go, so a page costs the same
// whatever the session's length.
export function drawPage(page, isEarlier) {
  const log = $('log');
  const frag = document.createDocumentFragment();
  batch = frag;
  older = isEarlier;
  try {
    for (const e of page.events) {
      if (!isEarlier) {
        if (e.seq <= lastSeq) continue;
        lastSeq = e.seq;
      }
      draw(e);
    }
  } finally {
    batch = null;
    older = false;
  }
  if (page.events.length) firstSeq = page.events[0].seq; // the newest page, or one before it
  moreBefore = page.more_before;
  const top = log.firstElementChild && log.firstElementChild.classList.contains('earlier') ? log.firstElementChild : null;
  if (isEarlier) {
    const from = log.scrollHeight - log.scrollTop; // the person's place, measured from the end
    (top ? top.after(frag) : log.prepend(frag));
    log.scrollTop = log.scrollHeight - from;
  } else {
    log.append(frag);
    log.scrollTop = log.scrollHeight;
  }
  if (moreBefore && !top) log.prepend(el('li', { class: 'earlier' }, el('button', { type: 'button', text: 'Show earlier messages', onclick: loadEarlier })));
  else if (!moreBefore && top) top.remove();
  syncConfirmButtons();
}

// loadEarlier draws the page before the earliest event drawn.
function loadEarlier() {
  const session = sessionId();
  if (!moreBefore || earlier || !session) return earlier;
  earlier = api('GET', `/v1/sessions/${encodeURIComponent(session)}/history?limit=${PAGE}&before=${firstSeq}`)
    .then((page) => {
      if (session === sessionId()) drawPage(page, true);
    })
    .catch((err) => {
      console.error('agentplane: an earlier page of the conversation could not be read (tried again on the next scroll):', err);
    })
    .finally(() => {
      earlier = null;
    });
  return earlier;
}

$('log').addEventListener('scroll', () => {
  if ($('log').scrollTop < 300) loadEarlier();
});

// showHint: the first screen of a new session says what can be typed —
// the examples of the mode's commands, launchers first, each a button
// that sends it.
export function showHint() {
  const examples = [...commands()]
    .sort((a, b) => (a.kind === 'launcher' ? 0 : 1) - (b.kind === 'launcher' ? 0 : 1))
    .map((c) => c.example)
    .filter(Boolean)
    .map((t) => t[0].toUpperCase() + t.slice(1))
    .slice(0, 3);
  hideHint();
  if (!examples.length) return;
  const box = el('div', { class: 'choices' });
  for (const text of examples) {
    box.append(
      el('button', {
        type: 'button',
        text,
        onclick: () => {
          hideHint();
          sendTurn({ text }).catch(() => {});
          focusComposer();
        },
      }),
    );
  }
  append(el('li', { class: 'msg-sys hint', id: 'hint' }, 'Type a message, or try one of these:', box));
}

// hintShown reports whether the first screen's examples are shown.
export const hintShown = () => $('hint') !== null;

function hideHint() {
  const h = $('hint');
  if (h) h.remove();
}
