// agentplane's web page. One module, no framework: the page is a client of
// the /v1 API like any other. Every message in the conversation is drawn
// from the session's event stream (ids are the audit chain's sequence
// numbers), so a page that reloads, or reconnects after the server
// restarted, shows each event once. Text from people, catalogs and tools
// is only ever set as textContent.

import { render as markdown } from './markdown.js';

const $ = (id) => document.getElementById(id);

const state = {
  key: sessionStorage.getItem('agentplane.key') || '',
  session: '',
  snapshot: null,
  lastSeq: 0,
  commands: [],
  commandsMode: '',
  modes: [],
  names: new Map(), // item id -> display name, learned from pickers
  confirm: null, // {intent, version}: the confirm button's intent; its token never leaves the page
  live: null, // the LLM's bubble while its text streams
  llmFailed: 0, // the seq of the last LLM exchange that failed
  inbox: new Map(),
  stopSession: null,
  down: new Map(), // stream -> retry delay, while it is disconnected
  started: false,
};

class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function randomKey() {
  const b = new Uint8Array(16);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

function headers(extra) {
  const h = { ...extra };
  if (state.key) h.Authorization = 'Bearer ' + state.key;
  return h;
}

// api sends a request and returns its JSON, or throws an APIError with
// the server's code and message (status 0: the server cannot be reached).
async function api(method, path, body, extra = {}) {
  const h = headers(extra);
  if (method !== 'GET') h['Content-Type'] = 'application/json'; // the server refuses a POST without it
  let res;
  try {
    res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new APIError(0, 'network', 'The server cannot be reached.');
  }
  const text = await res.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON: described below */
  }
  if (!res.ok) {
    const err = (data && data.error) || {};
    if (res.status === 401) signIn(err.message);
    throw new APIError(res.status, err.code || 'http_' + res.status, err.message || `The server answered ${res.status} ${res.statusText}.`);
  }
  return data;
}

// stream follows a Server-Sent Events endpoint over fetch (EventSource
// cannot send the API key), reconnecting with Last-Event-ID after a
// lost connection, with backoff, until stopped. A "closed" event from
// the server ends it when final is set (the workflow has ended), and
// otherwise reconnects (the server is draining).
function stream(path, { after = () => 0, onEvent, onOpen, name, final = false }) {
  let stopped = false;
  let ac = null;
  (async () => {
    let delay = 500;
    while (!stopped) {
      ac = new AbortController();
      let ended = false;
      try {
        const h = headers({ Accept: 'text/event-stream' });
        const a = after();
        if (a) h['Last-Event-ID'] = String(a);
        const res = await fetch(path, { headers: h, signal: ac.signal, cache: 'no-store' });
        if (res.status === 401) {
          signIn();
          return;
        }
        if (!res.ok) throw new Error('HTTP ' + res.status);
        up(name);
        delay = 500;
        if (onOpen) onOpen();
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += value;
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const ev = parseEvent(buf.slice(0, i));
            buf = buf.slice(i + 2);
            if (!ev) continue;
            if (ev.event === 'closed') {
              ended = final;
              continue;
            }
            try {
              onEvent(ev);
            } catch {
              /* an event the page cannot read is skipped */
            }
          }
        }
      } catch {
        /* the connection failed or was lost: retried below */
      }
      if (stopped || ended) {
        up(name);
        return;
      }
      downFor(name, delay);
      await sleep(delay);
      delay = Math.min(delay * 2, 8000);
    }
  })();
  return () => {
    stopped = true;
    up(name);
    if (ac) ac.abort();
  };
}

function parseEvent(block) {
  const ev = { id: '', event: 'message', data: '' };
  let data = [];
  for (const line of block.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (field === 'id') ev.id = value;
    else if (field === 'event') ev.event = value;
    else if (field === 'data') data.push(value);
  }
  if (!data.length) return null;
  ev.data = data.join('\n');
  return ev;
}

function up(name) {
  state.down.delete(name);
  showConnection();
}

function downFor(name, delay) {
  state.down.set(name, delay);
  showConnection();
}

function showConnection() {
  const conn = $('conn');
  if (!state.down.size) {
    conn.textContent = '';
    document.body.dataset.connection = 'up';
    return;
  }
  const secs = Math.max(...state.down.values()) / 1000;
  conn.textContent = `Connection lost — retrying every ${secs < 1 ? secs.toFixed(1) : Math.round(secs)} s…`;
  document.body.dataset.connection = 'down';
}

// --- the conversation -------------------------------------------------

function el(tag, attrs = {}, ...children) {
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

function append(node) {
  const log = $('log');
  const atEnd = log.scrollHeight - log.scrollTop - log.clientHeight < 80;
  log.append(node);
  if (atEnd) log.scrollTop = log.scrollHeight;
  return node;
}

function line(text, cls = 'msg-sys', seq) {
  return append(el('li', { class: cls, text, 'data-seq': seq }));
}

function why(trace) {
  if (!trace || !trace.length) return null;
  const ol = el('ol');
  for (const t of trace) ol.append(el('li', { text: t }));
  return el('details', { class: 'why' }, el('summary', { text: 'Why' }), ol);
}

function resultLine(r, seq) {
  if (!r || r.status === 'none') return;
  if (r.status === 'success') return line('✓ ' + (r.message || r.tool + ' done'), 'msg-sys ok', seq);
  if (r.status === 'confirmation_required') return;
  const detail = (r.error && (r.error.detail || r.error.message)) || r.message || r.status;
  line('✕ ' + detail, 'msg-sys bad', seq);
}

function commandName(id) {
  const c = state.commands.find((x) => x.id === id);
  return c ? c.display_name : id;
}

// render draws one event of the session's stream.
function render(e) {
  const seq = e.seq;
  switch (e.kind) {
    case 'open':
      line(`Session started in ${modeName(e.snapshot && e.snapshot.mode)} mode.`, 'msg-sys', seq);
      break;
    case 'resume':
      line('Session resumed.', 'msg-sys', seq);
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
        const b = state.live || append(el('li', { class: 'msg-llm' }));
        b.classList.remove('streaming');
        b.removeAttribute('aria-busy');
        b.replaceChildren(markdown(text)); // streamed as plain text; the whole answer as Markdown
        b.dataset.seq = seq;
        state.live = null;
      }
      if (x.error) {
        line('The LLM gave no answer: ' + x.error, 'msg-sys bad', seq);
        state.llmFailed = seq;
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
  }
}

function renderTurn(e) {
  const seq = e.seq;
  const input = e.input || {};
  if (input.selection) {
    const s = input.selection;
    line(`${commandName(s.command_id)}: ${state.names.get(s.id) || s.id}`, 'msg-user', seq);
  } else if (input.text) {
    line(input.text, 'msg-user', seq);
  }
  const d = e.decision || {};
  let li;
  switch (d.action) {
    case 'invoke_command':
      if (e.result && e.result.status !== 'none' && e.result.status !== 'confirmation_required') {
        resultLine(e.result, seq);
        li = $('log').lastElementChild;
      } else li = line(`Running ${commandName(d.command_id)}…`, 'msg-sys', seq);
      break;
    case 'open_picker':
      li = line(`${commandName(d.command_id)}: choose an item${d.prefilter_text ? ` matching “${d.prefilter_text}”` : ''}.`, 'msg-sys', seq);
      li.append(el('div', { class: 'choices' }, el('button', { type: 'button', text: 'Choose…', onclick: () => openPicker(d) })));
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

function optionButtons(d) {
  const box = el('div', { class: 'choices' });
  (d.options || []).forEach((label, i) => {
    const id = d.option_ids && d.option_ids[i];
    box.append(
      el('button', {
        type: 'button',
        text: label,
        onclick: () => {
          if (id) {
            state.names.set(id, label);
            sendTurn({ selection: { command_id: d.command_id, id } });
          } else sendTurn({ text: label });
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
  li.append(
    el(
      'div',
      { class: 'choices' },
      el('button', { type: 'button', class: 'primary confirm-choice', text: 'Confirm…', onclick: () => openConfirm(question) }),
      el('button', { type: 'button', class: 'confirm-choice', text: 'Cancel', onclick: () => decline() }),
    ),
  );
  syncConfirmButtons();
  return li;
}

function syncConfirmButtons() {
  const pending = !!(state.snapshot && state.snapshot.pending_confirmation);
  for (const b of document.querySelectorAll('.confirm-choice')) b.disabled = !pending;
}

function streamText(delta) {
  if (!state.live) state.live = append(el('li', { class: 'msg-llm streaming', 'aria-busy': 'true' }));
  state.live.textContent += delta;
  const log = $('log');
  log.scrollTop = log.scrollHeight;
}

function onSessionEvent(ev) {
  if (ev.event === 'notification') {
    onNotification(JSON.parse(ev.data));
    return;
  }
  if (ev.event === 'llm_delta') {
    try {
      streamText(JSON.parse(ev.data).text || '');
    } catch {
      /* a malformed delta is dropped */
    }
    return;
  }
  const seq = Number(ev.id);
  if (!seq || seq <= state.lastSeq) return; // shown already
  state.lastSeq = seq;
  let e;
  try {
    e = JSON.parse(ev.data);
  } catch {
    return;
  }
  render(e);
  if (e.snapshot) setSnapshot(e.snapshot);
}

// --- turns ------------------------------------------------------------

async function sendTurn(body) {
  if (!state.session) return;
  const key = randomKey(); // the same key on every retry: the server runs it once
  const path = `/v1/sessions/${encodeURIComponent(state.session)}/turns`;
  for (let attempt = 0; ; attempt++) {
    try {
      const a = await api('POST', path, { ...body, ui: true }, { 'Idempotency-Key': key });
      up('send');
      handleAnswer(a);
      return a;
    } catch (e) {
      if ((e.status === 0 || e.status >= 502) && attempt < 8) {
        const delay = Math.min(500 * 2 ** attempt, 8000); // 0.5 s doubling to 8 s: about 40 s in all
        downFor('send', delay);
        await sleep(delay);
        continue;
      }
      up('send');
      if (e.status !== 401) line('Not sent: ' + e.message, 'msg-sys bad');
      throw e;
    }
  }
}

function handleAnswer(a) {
  if (a.snapshot) setSnapshot(a.snapshot);
  const d = a.decision || {};
  if (a.repeated) return;
  if (d.action === 'open_picker') openPicker(d);
  const ci = a.confirm_intent || (a.llm && a.llm.confirm_intent);
  if (ci) {
    const snap = (a.llm && a.llm.snapshot) || a.snapshot;
    state.confirm = { intent: ci, version: snap.version };
    openConfirm(a.llm && a.llm.question ? a.llm.question : d.question_text);
  }
  if (d.action === 'continue_with_llm' && d.reason_code !== 'confirmation_declined' && !a.llm) {
    line('No LLM is configured on this server, so nobody answers this turn.', 'msg-sys');
  }
  if (a.llm && a.llm.failure && !(state.llmFailed > a.seq)) line(a.llm.failure, 'msg-sys bad'); // unless its record said so
  if (a.llm && a.llm.snapshot) setSnapshot(a.llm.snapshot);
}

$('composer').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const box = $('composer-text');
  const text = box.value.trim();
  if (!text) return;
  box.value = '';
  grow();
  try {
    await sendTurn({ text });
  } catch {
    if (!box.value.trim()) box.value = text; // kept, to shorten or send again
    grow();
  }
});

function grow() {
  const box = $('composer-text');
  box.style.height = 'auto';
  box.style.height = Math.min(box.scrollHeight, 160) + 'px';
}

$('composer-text').addEventListener('input', grow);
$('composer-text').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    $('composer').requestSubmit();
  }
});
// a keypress that still comes for that Enter (synthetic input sends one)
// must not leave a new line behind
$('composer-text').addEventListener('keypress', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey) ev.preventDefault();
});

// --- the picker -------------------------------------------------------

const picker = { d: null, items: [], active: -1, timer: 0, serial: 0 };

async function openPicker(d) {
  picker.d = d;
  $('picker-title').textContent = commandName(d.command_id);
  const q = $('picker-q');
  q.value = d.prefilter_text || '';
  $('picker-list').replaceChildren();
  $('picker-note').textContent = '';
  if (!$('picker').open) $('picker').showModal();
  q.focus();
  await searchPicker(q.value, d.highlight_id);
}

async function searchPicker(text, highlight) {
  const d = picker.d;
  const serial = ++picker.serial;
  const note = $('picker-note');
  const source = d.catalog_id ? `catalogs/${encodeURIComponent(d.catalog_id)}` : `providers/${encodeURIComponent(d.provider_id || '')}`;
  let m;
  try {
    const path = `/v1/sessions/${encodeURIComponent(state.session)}/${source}/items?limit=20&q=${encodeURIComponent(text)}`;
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
  $('picker').close();
  state.names.set(it.id, it.display_name);
  sendTurn({ selection: { command_id: picker.d.command_id, id: it.id } }).catch(() => {});
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
$('picker-cancel').addEventListener('click', () => $('picker').close());
$('picker').addEventListener('close', () => $('composer-text').focus());

// --- confirmation -----------------------------------------------------

function openConfirm(question) {
  $('confirm-text').textContent = question || 'Go ahead?';
  if (!$('confirm').open) $('confirm').showModal();
  $('confirm-no').focus(); // the safe answer is the default
}

async function confirmYes() {
  $('confirm').close();
  const pc = state.snapshot && state.snapshot.pending_confirmation;
  const c = state.confirm;
  state.confirm = null;
  if (c && state.snapshot && c.version === state.snapshot.version) {
    try {
      const r = await api('POST', `/v1/sessions/${encodeURIComponent(state.session)}/intents`, c.intent, { 'Idempotency-Key': randomKey() });
      if (r && r.snapshot_id) refreshSnapshot();
    } catch (e) {
      line('Not confirmed: ' + e.message, 'msg-sys bad');
    }
    return;
  }
  if (pc) sendTurn({ text: 'yes' }).catch(() => {}); // no token in this page (it reloaded): the human's yes, in a turn
}

function decline() {
  $('confirm').close();
  state.confirm = null;
  sendTurn({ text: 'no' }).catch(() => {});
}

$('confirm-yes').addEventListener('click', confirmYes);
$('confirm-no').addEventListener('click', decline);
$('confirm').addEventListener('close', () => $('composer-text').focus());

// --- mode and work context ---------------------------------------------

function modeName(key) {
  const m = state.modes.find((x) => x.key === key);
  return m ? m.displayName : key || '?';
}

function setSnapshot(s) {
  if (!s || (state.snapshot && s.session_id === state.snapshot.session_id && s.version < state.snapshot.version)) return;
  state.snapshot = s;
  const sel = $('mode');
  if (sel.value !== s.mode) sel.value = s.mode;
  renderContext();
  syncConfirmButtons();
  if (s.mode !== state.commandsMode) loadCommands();
}

async function refreshSnapshot() {
  try {
    setSnapshot(await api('GET', `/v1/sessions/${encodeURIComponent(state.session)}`));
  } catch {
    /* the stream brings it */
  }
}

async function loadCommands() {
  const mode = state.snapshot && state.snapshot.mode;
  state.commandsMode = mode;
  try {
    const l = await api('GET', `/v1/sessions/${encodeURIComponent(state.session)}/commands`);
    state.commands = l.commands;
    state.commandsMode = l.mode;
  } catch {
    state.commandsMode = '';
  }
  $('mode').disabled = !state.commands.some((c) => c.sets_session_mode);
  renderContext();
}

function renderContext() {
  const box = $('awc');
  const awc = (state.snapshot && state.snapshot.awc) || {};
  const clear = $('awc-clear');
  if (!awc.entity_header) {
    box.replaceChildren(el('p', { class: 'muted', text: 'Nothing is open.' }));
    clear.hidden = true;
    return;
  }
  const h = awc.entity_header;
  const parts = [
    el('p', {}, el('strong', { text: h.display_name || h.id }), el('br'), el('span', { class: 'muted', text: `${(awc.entity_type || '').replaceAll('_', ' ')} · ${h.id}` })),
  ];
  if (awc.related_entities && awc.related_entities.length) {
    parts.push(el('h3', { class: 'muted', text: 'Related' }));
    parts.push(
      el(
        'ul',
        {},
        ...awc.related_entities.map((r) => el('li', { text: `${r.header.display_name || r.header.id} (${[r.role, (r.entity_type || '').replaceAll('_', ' ')].filter(Boolean).join(', ')})` })),
      ),
    );
  }
  box.replaceChildren(...parts);
  clear.hidden = !clearCommand();
}

// clearCommand is the active command that clears the work context for
// the open entity's catalog.
function clearCommand() {
  const awc = (state.snapshot && state.snapshot.awc) || {};
  const setter = state.commands.filter((c) => c.sets_active_context && c.active_entity_type === awc.entity_type).map((c) => c.catalog_id);
  return state.commands.find((c) => c.clears_active_context && setter.includes(c.catalog_id));
}

$('awc-clear').addEventListener('click', () => {
  const c = clearCommand();
  const awc = state.snapshot.awc;
  if (c && awc.entity_header) sendTurn({ selection: { command_id: c.id, id: awc.entity_header.id } }).catch(() => {});
});

$('mode').addEventListener('change', (ev) => {
  const c = state.commands.find((x) => x.sets_session_mode);
  const key = ev.target.value; // the answer's snapshot sets it back if the switch is refused
  if (c) {
    state.names.set(key, modeName(key));
    sendTurn({ selection: { command_id: c.id, id: key } }).catch(() => {});
  }
});

async function loadModes() {
  try {
    const m = await api('GET', '/v1/modes');
    state.modes = m.modes || [];
  } catch {
    state.modes = [];
  }
  $('mode').replaceChildren(...state.modes.map((m) => el('option', { value: m.key, text: m.displayName || m.key })));
  if (state.snapshot) $('mode').value = state.snapshot.mode;
}

// --- panels: inbox, workflows, sessions --------------------------------

let panelKind = '';
let panelStop = null;
let panelWorkflow = ''; // the workflow the panel shows

function openPanel(kind, title, ...body) {
  panelKind = kind;
  $('panel-title').textContent = title;
  $('panel-body').replaceChildren(...body);
  if (!$('panel').open) $('panel').showModal();
}

$('panel-close').addEventListener('click', () => $('panel').close());
$('panel').addEventListener('close', () => {
  panelKind = '';
  panelWorkflow = '';
  if (panelStop) panelStop();
  panelStop = null;
  $('composer-text').focus();
});

const unread = (n) => n.state !== 'DELIVERED' && n.state !== 'FAILED';

function inboxBadge() {
  const count = [...state.inbox.values()].filter(unread).length;
  const b = $('inbox-badge');
  b.textContent = count > 99 ? '99+' : String(count);
  b.hidden = count === 0;
  $('open-inbox').setAttribute('aria-label', count ? `Inbox, ${count} unread` : 'Inbox');
}

// loadInbox reads the inbox; new notifications then come on the
// session's stream (one connection per page: browsers allow six per
// server, shared by every tab).
async function loadInbox() {
  try {
    const r = await api('GET', '/v1/inbox?limit=100');
    for (const n of r.notifications) state.inbox.set(n.id, n);
  } catch (e) {
    if (e.status === 404) $('open-inbox').hidden = true; // no notifications on this server
    return;
  }
  inboxBadge();
}

function onNotification(n) {
  state.inbox.set(n.id, n);
  inboxBadge();
  if (panelKind === 'inbox') showInbox();
}

async function showInbox() {
  const list = [...state.inbox.values()].sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
  const ul = el('ul', { class: 'items' });
  for (const n of list) {
    const li = el('li', { class: unread(n) ? 'unread' : '' }, el('div', { text: n.title }));
    if (n.body) li.append(el('div', { text: n.body }));
    li.append(el('div', { class: 'state', text: `${new Date(n.created_at).toLocaleString()} · ${n.urgency || 'NORMAL'}` }));
    ul.append(li);
  }
  openPanel('inbox', 'Inbox', list.length ? ul : el('p', { class: 'muted', text: 'No notifications.' }));
  // opened: every unread one shown here is acknowledged
  await Promise.all(
    list.filter(unread).map(async (n) => {
      try {
        state.inbox.set(n.id, await api('POST', `/v1/notifications/${encodeURIComponent(n.id)}/ack`));
      } catch {
        /* stays unread; acked next time */
      }
    }),
  );
  inboxBadge();
}

$('open-inbox').addEventListener('click', showInbox);

const waiting = (w) => ['awaiting_approval', 'awaiting_decision', 'interrupted'].includes(w.status);

async function loadWorkflows() {
  let list = [];
  try {
    list = (await api('GET', '/v1/workflows?limit=50')).workflows;
  } catch (e) {
    if (e.status === 404) $('open-workflows').hidden = true;
    return [];
  }
  const n = list.filter(waiting).length;
  const b = $('wf-badge');
  b.textContent = String(n);
  b.hidden = n === 0;
  $('open-workflows').setAttribute('aria-label', n ? `Workflows, ${n} waiting for you` : 'Workflows');
  return list;
}

async function showWorkflows() {
  if (panelStop) panelStop();
  panelStop = null;
  const list = await loadWorkflows();
  const ul = el('ul', { class: 'items' });
  for (const w of list) {
    ul.append(
      el(
        'li',
        {},
        el('button', { type: 'button', text: w.name || w.workflow_id, onclick: () => showWorkflow(w.workflow_id) }),
        el('span', { class: 'state', text: ` ${w.status.replaceAll('_', ' ')} · layer ${w.layer} · ${w.tasks.length} tasks` }),
      ),
    );
  }
  openPanel('workflows', 'Workflows', list.length ? ul : el('p', { class: 'muted', text: 'No workflows.' }));
}

// shown reports whether the panel still shows workflow id (a redraw
// must not reopen a panel the person closed).
const shown = (id) => panelKind === 'workflow' && panelWorkflow === id;

// wfView is what stays while the panel shows one workflow: the fields
// the person types in and the events list (a redraw moves them, so text,
// caret and focus survive), and the workflow's event stream.
let wfView = null;

function workflowView(id) {
  if (wfView && wfView.id === id && shown(id)) return wfView;
  if (panelStop) panelStop();
  wfView = {
    id,
    seq: 0, // of the state drawn
    look: '', // what was drawn, to skip a redraw that changes nothing
    timer: 0,
    feedback: el('textarea', { id: 'wf-feedback', rows: 2, 'aria-label': 'Feedback or reason', placeholder: 'Feedback or reason (optional)' }),
    requirement: el('input', { type: 'text', id: 'wf-requirement', 'aria-label': 'New requirement (to replan)', placeholder: 'New requirement (to replan)' }),
    events: el('ol', { class: 'state', 'aria-label': 'Events' }),
  };
  const v = wfView;
  let last = 0;
  panelStop = stream(`/v1/workflows/${encodeURIComponent(id)}/events`, {
    name: 'workflow',
    final: true,
    after: () => last,
    onEvent: (ev) => {
      last = Number(ev.id) || last;
      const x = JSON.parse(ev.data);
      v.events.append(el('li', { text: `${x.type}${x.layer ? ' · layer ' + x.layer : ''}${x.task ? ' · ' + x.task : ''}${x.reason ? ' — ' + x.reason : ''}` }));
      if (x.seq > v.seq) {
        clearTimeout(v.timer);
        v.timer = setTimeout(() => showWorkflow(id, true), 150); // the state changed: draw it again
      }
    },
  });
  return v;
}

async function showWorkflow(id, redraw = false) {
  if (redraw && !shown(id)) return;
  let wf;
  try {
    wf = await api('GET', `/v1/workflows/${encodeURIComponent(id)}`);
  } catch (e) {
    openPanel('workflow', 'Workflow', el('p', { class: 'error', text: e.message }));
    return;
  }
  if (redraw && !shown(id)) return; // closed meanwhile
  const v = workflowView(id);
  v.seq = Math.max(v.seq, wf.seq);
  // only a change the person can see is drawn: a button being pressed is not replaced for nothing
  const look = JSON.stringify([wf.status, wf.reason, wf.layer, wf.tasks.map((t) => [t.id, t.status, t.layer, t.error]), wf.approval, wf.decision, wf.interruption]);
  if (redraw && v.look === look) return;
  v.look = look;
  const body = [el('p', { class: 'state', 'data-status': wf.status, text: `${wf.workflow_id} · ${wf.status.replaceAll('_', ' ')}${wf.reason ? ' — ' + wf.reason : ''}` })];
  const layers = new Map();
  for (const t of wf.tasks) {
    const k = t.layer || 0;
    if (!layers.has(k)) layers.set(k, []);
    layers.get(k).push(t);
  }
  for (const k of [...layers.keys()].sort((a, b) => (a || 1e9) - (b || 1e9))) {
    const ul = el('ul');
    for (const t of layers.get(k)) {
      const li = el('li', { class: 'task' }, el('span', { class: 'st-' + t.status, text: `${t.id} · ${t.tool} · ${t.status}` }));
      if (t.error) li.append(el('div', { class: 'error', text: t.error.detail || t.error.code }));
      ul.append(li);
    }
    body.push(el('div', { class: 'layer' }, el('h3', { text: k ? `Layer ${k}` : 'Not yet run' }), ul));
  }
  const focused = document.activeElement;
  const { feedback, requirement } = v;
  const command = async (cmd) => {
    try {
      await api('POST', `/v1/workflows/${encodeURIComponent(id)}/commands`, cmd);
      feedback.value = requirement.value = ''; // used
    } catch (e) {
      line('Workflow: ' + e.message, 'msg-sys bad');
    }
    await showWorkflow(id, true);
    loadWorkflows();
  };
  if (wf.status === 'awaiting_approval' && wf.approval) {
    const a = wf.approval;
    const ul = el('ul');
    for (const t of a.tasks) ul.append(el('li', { class: 'task' }, `${t.id} · ${t.tool} (${t.impact})`, el('div', { class: 'args', text: JSON.stringify(t.args) })));
    body.push(
      el('section', { 'aria-labelledby': 'wf-approval' }, el('h3', { id: 'wf-approval', text: `Approval needed for layer ${a.layer}` }), ul, feedback),
      el(
        'div',
        { class: 'actions' },
        el('button', { type: 'button', text: 'Reject', onclick: () => command({ type: 'approval_response', checkpoint_id: a.checkpoint_id, approved: false, feedback: feedback.value }) }),
        el('button', { type: 'button', class: 'primary', text: 'Approve', onclick: () => command({ type: 'approval_response', checkpoint_id: a.checkpoint_id, approved: true, feedback: feedback.value }) }),
      ),
    );
  } else if (wf.status === 'awaiting_decision') {
    body.push(
      el('h3', { text: `Layer ${wf.decision ? wf.decision.layer : wf.layer} is done: go on?` }),
      feedback,
      requirement,
      el(
        'div',
        { class: 'actions' },
        el('button', { type: 'button', text: 'Abort', onclick: () => command({ type: 'abort', reason: feedback.value || 'stopped from the web page' }) }),
        el('button', { type: 'button', text: 'Replan', onclick: () => command({ type: 'replan_dag', new_requirement: requirement.value }) }),
        el('button', { type: 'button', class: 'primary', text: 'Continue', onclick: () => command({ type: 'continue', reason: feedback.value }) }),
      ),
    );
  } else if (wf.status === 'interrupted' && wf.interruption) {
    body.push(
      el('h3', { text: 'Interrupted: its runner stopped while it ran.' }),
      el(
        'div',
        { class: 'actions' },
        el('button', { type: 'button', text: 'Roll back', onclick: () => command({ type: 'checkpoint_response', checkpoint_id: wf.interruption.checkpoint_id, decision: 'rollback' }) }),
        el('button', { type: 'button', class: 'primary', text: 'Continue', onclick: () => command({ type: 'checkpoint_response', checkpoint_id: wf.interruption.checkpoint_id, decision: 'continue' }) }),
      ),
    );
  }
  body.push(el('details', {}, el('summary', { text: 'Events' }), v.events));
  body.push(el('div', { class: 'actions' }, el('button', { type: 'button', text: 'All workflows', onclick: showWorkflows })));
  openPanel('workflow', wf.name || 'Workflow', ...body);
  panelWorkflow = id;
  if (focused && $('panel-body').contains(focused)) focused.focus(); // a field moved by the redraw keeps the person's place
  else if (!$('panel').contains(document.activeElement)) ($('panel-body').querySelector('.actions button.primary') || $('panel-close')).focus();
}

$('open-workflows').addEventListener('click', showWorkflows);

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
    const current = s.session_id === state.session;
    ul.append(
      el(
        'li',
        {},
        el('button', { type: 'button', text: current ? 'Current' : 'Open', disabled: current, onclick: () => openSession(s.session_id) }),
        el('span', { text: ` ${new Date(s.created_at).toLocaleString()} · ${modeName(s.snapshot.mode)}${awc ? ' · ' + (awc.display_name || awc.id) : ''}` }),
      ),
    );
  }
  const actions = el('div', { class: 'actions' });
  if (state.key) actions.append(el('button', { type: 'button', text: 'Sign out', onclick: signOut }));
  actions.append(el('button', { type: 'button', class: 'primary', text: 'New session', onclick: () => newSession() }));
  openPanel('sessions', 'Sessions', list.length ? ul : el('p', { class: 'muted', text: 'No sessions yet.' }), actions);
}

$('open-sessions').addEventListener('click', showSessions);

// --- sessions and start -------------------------------------------------

async function newSession() {
  const s = await api('POST', '/v1/sessions', { ui: true }, { 'Idempotency-Key': randomKey() });
  await openSession(s.session_id);
}

async function openSession(id) {
  if ($('panel').open) $('panel').close();
  if (state.stopSession) state.stopSession();
  state.session = id;
  state.lastSeq = 0;
  state.snapshot = null;
  state.live = null;
  state.confirm = null;
  state.commandsMode = '';
  $('log').replaceChildren();
  localStorage.setItem('agentplane.session', id);
  history.replaceState(null, '', '#s=' + encodeURIComponent(id));
  const [snap] = await Promise.all([api('GET', `/v1/sessions/${encodeURIComponent(id)}`), loadCommands()]);
  setSnapshot(snap); // after the commands: the mode they are for is the snapshot's
  state.stopSession = stream(`/v1/sessions/${encodeURIComponent(id)}/events?inbox=${$('open-inbox').hidden ? 'false' : 'true'}`, {
    name: 'session',
    after: () => state.lastSeq,
    onEvent: onSessionEvent,
    onOpen: () => {
      state.live = null; // a reconnect: deltas of a reply still streaming resume from the record
    },
  });
  $('composer-text').disabled = false;
  $('send').disabled = false;
  $('composer-text').focus();
}

async function start() {
  // the key is checked while the modes and the inbox load
  const [check] = await Promise.allSettled([api('GET', '/v1/sessions?limit=1'), loadModes(), loadInbox()]);
  if (check.status === 'rejected') {
    if (check.reason.status !== 401) line('The server cannot be used: ' + check.reason.message, 'msg-sys bad');
    return;
  }
  state.started = true;
  const hash = new URLSearchParams(location.hash.slice(1)).get('s');
  const wanted = hash || localStorage.getItem('agentplane.session');
  try {
    if (wanted) await openSession(wanted);
    else await newSession();
  } catch (e) {
    if (e.status === 404) await newSession();
    else {
      line('Could not open the session: ' + e.message, 'msg-sys bad');
      return;
    }
  }
  document.documentElement.dataset.ready = String(Math.round(performance.now()));
  loadWorkflows();
  setInterval(loadWorkflows, 10000);
}

// --- sign-in ----------------------------------------------------------

function signIn(message) {
  const d = $('signin');
  $('signin-error').textContent = state.key && message ? message : '';
  if (!d.open) d.showModal();
  $('signin-key').focus();
}

$('signin-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  state.key = $('signin-key').value.trim();
  sessionStorage.setItem('agentplane.key', state.key);
  $('signin-key').value = '';
  $('signin').close();
  if (!state.started) start();
  else if (state.session) openSession(state.session);
});
$('signin').addEventListener('cancel', (ev) => ev.preventDefault()); // nothing works without a key

function signOut() {
  sessionStorage.removeItem('agentplane.key');
  localStorage.removeItem('agentplane.session');
  location.hash = '';
  location.reload();
}

start();
