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
  firstSeq: 0, // the earliest event drawn
  moreBefore: false, // earlier events are not drawn yet
  earlier: null, // the load of an earlier page, while it runs
  batch: null, // a fragment that events are drawn into (a page of history), else null
  older: false, // the page being drawn is earlier history (its questions were answered since)
  waysLoaded: false, // the ways to sign in were asked for
  entityTypes: {}, // entity type -> display name
  commandNames: {}, // command id -> display name, of every mode (a launcher's picker runs a command of its target mode)
};

// PAGE is how many events a page of history holds: the newest page is
// drawn when a session opens, earlier ones as the person scrolls up.
const PAGE = 100;

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

// append adds a line to the conversation (or to the page of history being
// drawn), following it when the person was at the end.
function append(node) {
  if (state.batch) {
    state.batch.append(node);
    return node;
  }
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
  if (!r || r.status === 'none') return null;
  if (r.status === 'success') return line('✓ ' + (r.message || r.tool + ' done'), 'msg-sys ok', seq);
  if (r.status === 'confirmation_required') return null;
  const detail = (r.error && (r.error.detail || r.error.message)) || r.message || r.status;
  return line('✕ ' + detail, 'msg-sys bad', seq);
}

function commandName(id) {
  const c = state.commands.find((x) => x.id === id);
  return c ? c.display_name : state.commandNames[id] || id;
}

// render draws one event of the session's stream.
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
  retire(); // a new turn answers (or passes over) every earlier question
  hideHint();
  if (input.selection) {
    const s = input.selection;
    const c = state.commands.find((x) => x.id === s.command_id);
    const name = state.names.get(s.id) || (c && c.sets_session_mode ? modeName(s.id) : s.id); // a reload knows the modes' names
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
  if (!state.older) live.push(box);
  else answered(box); // a page of earlier history: all answered since
  return box;
}

function answered(box) {
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
function answer(box, send) {
  answered(box);
  send().catch(() => {
    if (!box.isConnected || box.dataset.retired) return; // a newer turn passed over it
    for (const b of box.querySelectorAll('button')) b.disabled = false;
    live.push(box);
  });
}

function optionButtons(d) {
  const box = choices();
  (d.options || []).forEach((label, i) => {
    const id = d.option_ids && d.option_ids[i];
    box.append(
      el('button', {
        type: 'button',
        text: label,
        onclick: () => {
          if (id) state.names.set(id, label);
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
  if (answeredEarly) { // the dialog was answered before this line came: it is drawn answered
    answeredEarly = false;
    answered(box);
  }
  return li;
}

// syncConfirmButtons retires the confirmation's buttons once the session
// no longer waits for it (answered here, in another tab, or expired).
function syncConfirmButtons() {
  if (state.snapshot && state.snapshot.pending_confirmation) return;
  for (const box of live.filter((b) => b.classList.contains('confirm-choices'))) answered(box);
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
  syncConfirmButtons();
  if (!state.firstSeq) state.firstSeq = seq;
}

// drawPage draws a page of history: the newest when a session opens
// (older = false), or one before what is drawn. Each event is drawn once,
// into a fragment put in place in one go, so a page costs the same
// whatever the session's length.
function drawPage(page, older) {
  const log = $('log');
  const frag = document.createDocumentFragment();
  state.batch = frag;
  state.older = older;
  try {
    for (const e of page.events) {
      if (!older) {
        if (e.seq <= state.lastSeq) continue;
        state.lastSeq = e.seq;
      }
      try {
        render(e);
      } catch {
        /* an event the page cannot draw is skipped */
      }
    }
  } finally {
    state.batch = null;
    state.older = false;
  }
  if (page.events.length) state.firstSeq = page.events[0].seq; // the newest page, or one before it
  state.moreBefore = page.more_before;
  const top = log.firstElementChild && log.firstElementChild.classList.contains('earlier') ? log.firstElementChild : null;
  if (older) {
    const from = log.scrollHeight - log.scrollTop; // the person's place, measured from the end
    (top ? top.after(frag) : log.prepend(frag));
    log.scrollTop = log.scrollHeight - from;
  } else {
    log.append(frag);
    log.scrollTop = log.scrollHeight;
  }
  if (state.moreBefore && !top) log.prepend(el('li', { class: 'earlier' }, el('button', { type: 'button', text: 'Show earlier messages', onclick: loadEarlier })));
  else if (!state.moreBefore && top) top.remove();
  syncConfirmButtons();
}

// loadEarlier draws the page before the earliest event drawn.
function loadEarlier() {
  if (!state.moreBefore || state.earlier || !state.session) return state.earlier;
  const session = state.session;
  state.earlier = api('GET', `/v1/sessions/${encodeURIComponent(session)}/history?limit=${PAGE}&before=${state.firstSeq}`)
    .then((page) => {
      if (session === state.session) drawPage(page, true);
    })
    .catch(() => {
      /* tried again on the next scroll */
    })
    .finally(() => {
      state.earlier = null;
    });
  return state.earlier;
}

$('log').addEventListener('scroll', () => {
  if ($('log').scrollTop < 300) loadEarlier();
});

// The first screen of a new session says what can be typed: the examples
// of the mode's commands, launchers first, each a button that sends it.
function showHint() {
  const examples = [...state.commands]
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

function hideHint() {
  const h = $('hint');
  if (h) h.remove();
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

// focusComposer puts the focus and the caret in the message box. A
// dialog closed by a mouse click has already given the focus back to the
// box, but the click's own handling left the document's caret where the
// pointer was (a focus() on a focused element does not move it), so keys
// would reach the box and type nothing: the caret is set explicitly.
function focusComposer() {
  const box = $('composer-text');
  box.focus();
  const end = box.value.length;
  box.setSelectionRange(end, end);
}

// backToComposer is a dialog's close event: the focus goes back to the
// message box, unless the person has already put it somewhere else (the
// event comes a moment after the dialog closed: a key or click meanwhile
// must keep its place).
function backToComposer(ev) {
  const a = document.activeElement;
  const restored = ev && ev.target.opener; // where closing put the focus back
  if (!a || a === document.body || a === restored || a === $('composer-text') || a.closest('dialog:not([open])')) focusComposer();
}

// openModal opens a dialog, noting what had the focus: closing it gives
// the focus back there, and its close event moves it on to the box.
function openModal(d) {
  d.opener = document.activeElement;
  d.showModal();
}

// closeDialog closes a dialog and gives the message box the focus and the
// caret at once: a key pressed right after the click that closed it
// reaches the box (the dialog's close event comes a moment later).
function closeDialog(d) {
  d.close();
  focusComposer();
}

function grow() {
  const box = $('composer-text');
  box.style.height = 'auto';
  box.style.height = Math.min(box.scrollHeight, 160) + 'px';
}

$('composer-text').addEventListener('input', grow);
// the placeholder's hint fits where the box is wide enough
const narrow = matchMedia('(max-width: 560px)');
const placeholder = () => ($('composer-text').placeholder = narrow.matches ? 'Message' : 'Message — Enter sends, Shift+Enter for a new line');
narrow.addEventListener('change', placeholder);
placeholder();
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

const picker = { d: null, box: null, items: [], active: -1, timer: 0, serial: 0 };

// openPicker opens the picker of a decision; box is the conversation's
// Choose… group it answers, when opened from there.
async function openPicker(d, box = null) {
  picker.d = d;
  picker.box = box || (live.length ? live[live.length - 1] : null);
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
    const path = `/v1/sessions/${encodeURIComponent(state.session)}/${source}/items?limit=20&q=${encodeURIComponent(text)}${mode}`;
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
  state.names.set(it.id, it.display_name);
  const box = picker.box;
  const send = () => sendTurn({ selection: { command_id: picker.d.command_id, id: it.id } });
  if (box && live.includes(box)) answer(box, send);
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

// --- confirmation -----------------------------------------------------

// openConfirm asks in the dialog; box is the conversation's group of the
// same question, answered with it.
function openConfirm(question, box = null) {
  confirmBox = box || live.find((b) => b.classList.contains('confirm-choices')) || null;
  $('confirm-text').textContent = question || 'Go ahead?';
  if (!$('confirm').open) openModal($('confirm'));
  $('confirm-no').focus(); // the safe answer is the default
}

let confirmBox = null;
// answeredEarly: the dialog was answered before the conversation drew
// the question's line (the answer to the turn came before its event)
let answeredEarly = false;

// confirmTarget is the conversation's group of the question the dialog
// answers, looked up when it is answered: the line may have been drawn
// between the dialog's opening (the turn's answer) and the click (its
// event came in meanwhile), and every earlier group was retired by the
// turn, so the live confirmation group is this question's.
function confirmTarget() {
  if (confirmBox && confirmBox.isConnected) return confirmBox;
  return live.find((b) => b.classList.contains('confirm-choices')) || null;
}

async function confirmYes() {
  closeDialog($('confirm'));
  const box = confirmTarget();
  answered(box);
  answeredEarly = !box;
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

function decline(box = confirmTarget()) {
  closeDialog($('confirm'));
  answered(box);
  answeredEarly = !box;
  state.confirm = null;
  sendTurn({ text: 'no' }).catch(() => {});
}

$('confirm-yes').addEventListener('click', confirmYes);
$('confirm-no').addEventListener('click', () => decline());
$('confirm').addEventListener('close', backToComposer);

// --- mode and work context ---------------------------------------------

function modeName(key) {
  const m = state.modes.find((x) => x.key === key);
  return m ? m.displayName : key || '?';
}

function setSnapshot(s) {
  if (!s || (state.snapshot && s.session_id === state.snapshot.session_id && s.version < state.snapshot.version)) return;
  state.snapshot = s;
  showMode();
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
    state.entityTypes = l.entity_types || {};
    state.commandNames = l.command_names || {};
  } catch {
    state.commandsMode = '';
  }
  $('mode').disabled = !state.commands.some((c) => c.sets_session_mode);
  renderContext();
  if ($('hint')) showHint(); // the examples of the mode now active
}

// typeName is how an entity type is shown: its configured name, else its key.
const typeName = (key) => state.entityTypes[key] || (key || '').replaceAll('_', ' ');

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
  const awc = (state.snapshot && state.snapshot.awc) || {};
  const setter = state.commands.filter((c) => c.sets_active_context && c.active_entity_type === awc.entity_type).map((c) => c.catalog_id);
  return state.commands.find((c) => c.clears_active_context && setter.includes(c.catalog_id));
}

$('awc-clear').addEventListener('click', () => {
  const c = clearCommand();
  const awc = state.snapshot.awc;
  focusComposer(); // the button hides when the context clears: the focus must not go with it
  if (c && awc.entity_header) sendTurn({ selection: { command_id: c.id, id: awc.entity_header.id } }).catch(() => {});
});

// The mode switcher is a button that opens a list of the modes (a
// popover: a click elsewhere or Escape closes it), used alike with the
// mouse and with keys: arrows move, Enter or a click chooses.
const modeMenu = { active: -1 };

function showMode() {
  const key = (state.snapshot && state.snapshot.mode) || '';
  $('mode').dataset.value = key;
  $('mode-name').textContent = key ? modeName(key) : '…';
}

function modeActivate(i) {
  const list = $('mode-list');
  const n = list.children.length;
  if (!n) return;
  modeMenu.active = Math.max(0, Math.min(n - 1, i));
  for (const [j, o] of [...list.children].entries()) o.setAttribute('aria-selected', String(j === modeMenu.active));
  list.setAttribute('aria-activedescendant', list.children[modeMenu.active].id);
}

function openModes() {
  const list = $('mode-list');
  const r = $('mode').getBoundingClientRect();
  list.style.left = Math.max(4, Math.min(r.left, innerWidth - 200)) + 'px';
  list.style.top = r.bottom + 4 + 'px';
  list.showPopover();
  modeActivate(state.modes.findIndex((m) => m.key === $('mode').dataset.value));
  list.focus();
}

function chooseMode(i) {
  const m = state.modes[i];
  $('mode-list').hidePopover();
  focusComposer();
  const c = state.commands.find((x) => x.sets_session_mode);
  if (!m || !c || m.key === $('mode').dataset.value) return;
  state.names.set(m.key, modeName(m.key));
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
  if (ev.key in moves) modeActivate(modeMenu.active + moves[ev.key]);
  else if (ev.key === 'Home' || ev.key === 'End') modeActivate(ev.key === 'Home' ? 0 : state.modes.length - 1);
  else if (ev.key === 'Enter' || ev.key === ' ') chooseMode(modeMenu.active);
  else if (ev.key === 'Tab') $('mode-list').hidePopover();
  else return;
  ev.preventDefault();
});
// the press does not take the focus from the list (nor leave a caret behind)
$('mode-list').addEventListener('mousedown', (ev) => ev.preventDefault());

async function loadModes() {
  try {
    const m = await api('GET', '/v1/modes');
    state.modes = m.modes || [];
  } catch {
    state.modes = [];
  }
  $('mode-list').replaceChildren(
    ...state.modes.map((m, i) =>
      el('li', { role: 'option', id: 'mode-' + i, 'data-key': m.key, 'aria-selected': 'false', text: m.displayName || m.key, onclick: () => chooseMode(i), onmousemove: () => modeActivate(i) }),
    ),
  );
  showMode();
}

// --- panels: inbox, workflows, sessions --------------------------------

let panelKind = '';
let panelStop = null;
let panelWorkflow = ''; // the workflow the panel shows

function openPanel(kind, title, ...body) {
  panelKind = kind;
  $('panel-title').textContent = title;
  $('panel-body').replaceChildren(...body);
  if (!$('panel').open) openModal($('panel'));
}

$('panel-close').addEventListener('click', () => closeDialog($('panel')));
$('panel').addEventListener('close', (ev) => {
  panelKind = '';
  panelWorkflow = '';
  if (panelStop) panelStop();
  panelStop = null;
  backToComposer(ev);
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
    error: el('p', { class: 'error', role: 'alert' }),
    modify: null, // the form that modifies an interrupted workflow's pending tasks, once opened
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
    v.error.textContent = '';
    try {
      await api('POST', `/v1/workflows/${encodeURIComponent(id)}/commands`, cmd);
      feedback.value = requirement.value = ''; // used
      v.modify = null;
    } catch (e) {
      v.error.textContent = 'Not done: ' + e.message; // the server's reason, where the person acted
      v.look = ''; // drawn again with the message
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
    const resume = (decision, modifications) => command({ type: 'checkpoint_response', checkpoint_id: wf.interruption.checkpoint_id, decision, modifications });
    const pending = wf.tasks.filter((t) => t.status === 'pending');
    body.push(
      el('h3', { text: 'Interrupted: its runner stopped while it ran.' }),
      el(
        'div',
        { class: 'actions' },
        el('button', { type: 'button', text: 'Roll back', onclick: () => resume('rollback') }),
        el('button', {
          type: 'button',
          text: 'Modify…',
          'aria-expanded': String(!!v.modify),
          disabled: !pending.length,
          title: pending.length ? 'Change the arguments of tasks that have not run, or skip them' : 'No task is left to change',
          onclick: () => {
            v.modify = v.modify || modifyForm(pending);
            v.look = '';
            showWorkflow(id, true).then(() => v.modify && v.modify.fields[0] && v.modify.fields[0].args.focus());
          },
        }),
        el('button', { type: 'button', class: 'primary', text: 'Continue', onclick: () => resume('continue') }),
      ),
    );
    if (v.modify) {
      body.push(
        el(
          'section',
          { class: 'modify', 'aria-labelledby': 'wf-modify' },
          el('h3', { id: 'wf-modify', text: 'Modify the tasks that have not run' }),
          ...v.modify.fields.map((f) => f.set),
          el(
            'div',
            { class: 'actions' },
            el('button', { type: 'button', text: 'Cancel', onclick: () => ((v.modify = null), (v.look = ''), showWorkflow(id, true)) }),
            el('button', {
              type: 'button',
              class: 'primary',
              text: 'Apply and continue',
              onclick: () => {
                const m = modifications(v.modify);
                if (m.error) {
                  v.error.textContent = m.error;
                  return;
                }
                resume('modify', m.value);
              },
            }),
          ),
        ),
      );
    }
  }
  body.push(v.error);
  body.push(el('details', {}, el('summary', { text: 'Events' }), v.events));
  body.push(el('div', { class: 'actions' }, el('button', { type: 'button', text: 'All workflows', onclick: showWorkflows })));
  openPanel('workflow', wf.name || 'Workflow', ...body);
  panelWorkflow = id;
  if (focused && $('panel-body').contains(focused)) focused.focus(); // a field moved by the redraw keeps the person's place
  else if (!$('panel').contains(document.activeElement)) ($('panel-body').querySelector('.actions button.primary') || $('panel-close')).focus();
}

$('open-workflows').addEventListener('click', showWorkflows);

// modifyForm is a field per pending task: its arguments as JSON, and
// whether to skip it.
function modifyForm(pending) {
  return {
    fields: pending.map((t, i) => {
      const args = el('textarea', { id: 'wf-args-' + i, rows: 3, spellcheck: 'false', 'data-task': t.id });
      args.value = JSON.stringify(t.args || {}, null, 2);
      const skip = el('input', { type: 'checkbox', id: 'wf-skip-' + i, 'data-task': t.id });
      skip.addEventListener('change', () => (args.disabled = skip.checked));
      const set = el(
        'fieldset',
        {},
        el('legend', { text: `${t.id} · ${t.tool}` }),
        el('label', { for: args.id, text: 'Arguments (JSON)' }),
        args,
        el('label', {}, skip, ' Skip this task'),
      );
      return { task: t.id, original: args.value, args, skip, set };
    }),
  };
}

// modifications reads the form: what changed, or an error naming the
// task whose arguments are not a JSON object.
function modifications(form) {
  const out = { args: {}, skip: [] };
  for (const f of form.fields) {
    if (f.skip.checked) {
      out.skip.push(f.task);
      continue;
    }
    if (f.args.value === f.original) continue;
    let v;
    try {
      v = JSON.parse(f.args.value);
    } catch (e) {
      return { error: `Task ${f.task}: the arguments are not JSON (${e.message}).` };
    }
    if (!v || typeof v !== 'object' || Array.isArray(v)) return { error: `Task ${f.task}: the arguments must be a JSON object, {…}.` };
    out.args[f.task] = v;
  }
  if (!out.skip.length && !Object.keys(out.args).length) return { error: 'Nothing was changed: edit a task\'s arguments or skip it, or choose Continue.' };
  return { value: out };
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

// --- the audit trail ----------------------------------------------------

// The audit panel shows the session's hash chain as a timeline, newest
// first and a page at a time, with the server's verification of the whole
// chain and, on demand, a replay against the configuration it runs now.
const AUDIT_PAGE = 50;

// chainRead asks for a read of a whole chain (verification, replay). The
// server runs one of them at a time per person: the page sends them one
// after another, and when another tab's is running (429) it waits and
// asks again.
let chainReads = Promise.resolve();
function chainRead(path) {
  const run = async () => {
    for (let attempt = 1; ; attempt++) {
      try {
        return await api('GET', path);
      } catch (e) {
        if (e.code !== 'too_many_requests' || attempt === 20) throw e;
        await sleep(500);
      }
    }
  };
  const p = chainReads.then(run, run);
  chainReads = p.catch(() => {});
  return p;
}

async function showAudit() {
  const sid = encodeURIComponent(state.session);
  const view = { oldest: 0, more: true, bad: null, divs: new Map(), loading: null };
  const status = el('p', { class: 'audit-status', id: 'audit-status', role: 'status', text: 'Verifying the chain…' });
  const list = el('ol', { class: 'items timeline', id: 'audit-list', 'aria-label': 'Audit records, newest first' });
  const older = el('button', { type: 'button', id: 'audit-older', text: 'Show older records', hidden: true });
  const replayOut = el('div', { id: 'audit-replay', 'aria-live': 'polite' });
  const replayBtn = el('button', { type: 'button', id: 'audit-replay-run', text: 'Replay' });
  openPanel('audit', 'Audit trail', status, el('div', { class: 'actions' }, replayBtn), replayOut, list, el('div', { class: 'actions' }, older));

  const mark = (li) => {
    const seq = Number(li.dataset.seq);
    if (view.bad && view.bad.seq === seq && !li.classList.contains('bad-record')) {
      li.classList.add('bad-record');
      li.append(el('div', { class: 'error', text: 'This record breaks the chain: ' + view.bad.reason }));
    }
    const d = view.divs.get(seq);
    if (d && !li.classList.contains('diverged')) {
      li.classList.add('diverged');
      li.append(el('div', { class: 'state', text: `Replay differs here: ${d.map((x) => x.field).join(', ')}` }));
    }
  };
  const page = async (limit = AUDIT_PAGE) => {
    const q = view.oldest ? `&before=${view.oldest}` : '';
    let text;
    try {
      const res = await fetch(`/v1/sessions/${sid}/audit?limit=${limit}${q}`, { headers: headers() });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      text = await res.text();
    } catch (e) {
      list.append(el('li', { class: 'error', text: 'The records could not be read: ' + e.message }));
      return;
    }
    const recs = text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
    if (recs.length) view.oldest = recs[0].seq;
    view.more = recs.length === limit && view.oldest > 1;
    for (const r of recs.reverse()) {
      const li = auditRecord(r);
      list.append(li);
      mark(li);
    }
    older.hidden = !view.more;
  };
  const more = (limit) => (view.loading = view.loading || page(limit).finally(() => (view.loading = null)));
  // showRecord reads older pages until the record is drawn, and shows it
  const showRecord = async (seq) => {
    while (view.more && view.oldest > seq) await more(Math.min(1000, view.oldest - seq + AUDIT_PAGE)); // far back: larger pages
    const li = list.querySelector(`[data-seq="${seq}"]`);
    if (li) {
      li.scrollIntoView({ block: 'center' });
      li.querySelector('summary').focus();
    }
  };
  older.addEventListener('click', () => more());
  await more();

  // the whole chain is checked by the server; the first page is already shown
  chainRead(`/v1/sessions/${sid}/audit/verification`)
    .then((v) => {
      view.bad = v.first_bad || null;
      if (v.verified) {
        status.className = 'audit-status ok';
        status.textContent = `✓ The chain verifies: ${v.records} record${v.records === 1 ? '' : 's'}, each linked to the one before by its hash.`;
      } else {
        status.className = 'audit-status bad';
        status.textContent = `✕ The chain does not verify: record #${v.first_bad.seq} is the first bad one — ${v.first_bad.reason}.`;
        for (const li of list.children) mark(li);
        if (v.first_bad.seq) status.append(' ', el('button', { type: 'button', id: 'audit-show-bad', text: `Show record #${v.first_bad.seq}`, onclick: () => showRecord(v.first_bad.seq) }));
      }
    })
    .catch((e) => {
      status.className = 'audit-status bad';
      status.textContent = 'The chain could not be verified: ' + e.message;
    });

  replayBtn.addEventListener('click', async () => {
    replayBtn.disabled = true;
    replayOut.replaceChildren(el('p', { class: 'muted', text: 'Replaying…' }));
    try {
      const r = await chainRead(`/v1/sessions/${sid}/audit/replay`);
      view.divs.clear();
      for (const d of r.divergences) view.divs.set(d.seq, [...(view.divs.get(d.seq) || []), d]);
      const out = [
        el('p', {
          class: r.divergences.length ? 'audit-status bad' : 'audit-status ok',
          text: r.divergences.length
            ? `Replayed ${r.records} records, each on the configuration that decided it: ${r.total} divergence${r.total === 1 ? '' : 's'}.`
            : `Replayed ${r.records} records, each on the configuration that decided it: it does everything the same way.`,
        }),
      ];
      if (r.total > 50) out.push(el('p', { class: 'muted', text: `The first 50 are listed.` }));
      for (const d of r.divergences.slice(0, 50)) {
        out.push(
          el(
            'div',
            { class: 'divergence' },
            el('strong', { text: `#${d.seq} (${d.kind}): ${d.field} differs` }),
            ' ',
            el('button', { type: 'button', class: 'show-record', text: 'Show the record', onclick: () => showRecord(d.seq) }),
            el('div', { text: 'Recorded:' }),
            el('pre', { text: clip(JSON.stringify(d.recorded, null, 1)) }),
            el('div', { text: 'Now:' }),
            el('pre', { text: clip(JSON.stringify(d.replayed, null, 1)) }),
          ),
        );
      }
      replayOut.replaceChildren(...out);
      for (const li of list.children) mark(li);
    } catch (e) {
      replayOut.replaceChildren(el('p', { class: 'error', text: 'Not replayed: ' + e.message }));
    } finally {
      replayBtn.disabled = false;
    }
  });
}

const clip = (t) => (t && t.length > 800 ? t.slice(0, 800) + ' …' : t || '');

const kindNames = { open: 'Session opened', resume: 'Resumed', turn: 'Turn', execution: 'Execution', llm: 'LLM exchange', proposal: 'LLM proposal', notice: 'Notice' };

// auditRecord is one record of the chain: what happened, by whom, and on
// demand the decision's trace, the state diff, the arguments and the LLM
// exchange.
function auditRecord(r) {
  const li = el('li', { 'data-seq': r.seq });
  li.append(
    el(
      'div',
      { class: 'rec-head' },
      el('strong', { text: `#${r.seq} ${kindNames[r.kind] || r.kind}` }),
      el('span', { class: 'state', text: new Date(r.time).toLocaleString() }),
      r.principal ? el('span', { class: 'state', text: 'by ' + r.principal }) : null,
      r.config ? el('span', { class: 'state rec-config', title: 'Decided by the configuration ' + r.config, text: 'config ' + r.config.slice(0, 12) }) : null,
    ),
  );
  const say = (text, cls) => li.append(el('div', { class: cls || '', text }));
  const d = r.decision;
  const res = r.result;
  if (r.kind === 'open' && r.state) say(`In ${modeName(r.state.mode)} mode.`);
  if (r.input) say(r.input.text ? `“${r.input.text}”` : r.input.selection ? `Chose ${r.input.selection.id} for ${commandName(r.input.selection.command_id)}` : '');
  if (d && r.kind !== 'proposal') say(`Decision: ${d.action.replaceAll('_', ' ')}${d.command_id ? ' · ' + d.command_id : ''}${d.resolved_id ? '(' + d.resolved_id + ')' : ''}${d.reason_code ? ' · ' + d.reason_code.replaceAll('_', ' ') : ''}`);
  if (r.kind === 'proposal' && r.intent) say(`The LLM proposed ${r.intent.action}(${JSON.stringify(r.intent.args || {})}) and asked: ${(d && d.question_text) || ''}`);
  if (r.kind === 'execution' && r.intent) say(`${r.intent.action}(${JSON.stringify(r.intent.args || {})}) · asked by ${r.intent.origin || 'api'}`);
  if (r.presented) say(`Confirmed by ${r.principal || 'the user'} with the confirmation token issued for it.`);
  if (r.approval) say(`Run under approval ${r.approval}.`);
  if (res && res.status && res.status !== 'none') {
    const detail = res.status === 'success' ? res.message || 'done' : (res.error && (res.error.detail || res.error.message)) || res.message || '';
    say(`Result: ${res.status.replaceAll('_', ' ')}${detail ? ' — ' + detail : ''}`, res.status === 'success' ? 'st-completed' : res.status === 'confirmation_required' ? '' : 'st-failed');
  }
  if (r.llm) {
    const x = r.llm;
    const calls = (x.response && x.response.tool_calls) || [];
    say(`${x.internal ? 'Internal turn · ' : ''}${x.model} · ${x.attempts} attempt${x.attempts === 1 ? '' : 's'}${x.error ? ' · failed: ' + x.error : ''}`);
    if (x.response && x.response.text) say(clip(x.response.text));
    if (calls.length) say('Tool calls: ' + calls.map((c) => c.name).join(', '));
  }
  if (r.notice) say(`${r.notice.title || ''}${r.notice.body ? ' — ' + r.notice.body : ''}`);
  for (const n of r.notes || []) say(n, 'state');
  const more = [];
  if (d && d.trace && d.trace.length) more.push(el('h4', { text: 'Trace' }), el('ol', {}, ...d.trace.map((t) => el('li', { text: t }))));
  if (res && res.state_diff && res.state_diff.length)
    more.push(el('h4', { text: 'State diff' }), el('ul', {}, ...res.state_diff.map((o) => el('li', { text: `${o.op} ${o.path}${'value' in o ? ' = ' + JSON.stringify(o.value) : ''}` }))));
  if (r.llm && r.llm.tools && r.llm.tools.length) more.push(el('h4', { text: 'Tools offered' }), el('p', { text: r.llm.tools.join(', ') }));
  more.push(el('h4', { text: 'Chain' }), el('p', { class: 'args', text: `hash ${r.hash}\nprev ${r.prev || '(none: the first record)'}` }));
  li.append(el('details', { class: 'why' }, el('summary', { text: 'Details' }), ...more));
  return li;
}

$('open-audit').addEventListener('click', () => state.session && showAudit());

// --- sessions and start -------------------------------------------------

async function newSession() {
  const s = await api('POST', '/v1/sessions', { ui: true }, { 'Idempotency-Key': randomKey() });
  await openSession(s.session_id);
}

async function openSession(id) {
  if ($('panel').open) closeDialog($('panel'));
  if (state.stopSession) state.stopSession();
  state.session = id;
  state.lastSeq = 0;
  state.firstSeq = 0;
  state.moreBefore = false;
  state.earlier = null;
  state.snapshot = null;
  state.live = null;
  state.confirm = null;
  state.commandsMode = '';
  live.length = 0;
  $('log').replaceChildren();
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
    api('GET', `/v1/sessions/${sid}/history?limit=${PAGE}`),
    loadCommands(),
  ]);
  setSnapshot(resumed.snapshot); // after the commands: a mode other than theirs loads them again
  drawPage(page, false);
  if (!page.more_before && !page.events.some((e) => e.kind === 'turn')) showHint();
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
  if (!state.started && !state.waysLoaded) {
    state.waysLoaded = true;
    await loadWays();
    await fromProvider();
    if (ways.error) {
      signIn();
      $('signin-error').textContent = ways.error;
      return;
    }
  }
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
//
// Two ways in, as the server says (GET /v1/auth): an API key, or the
// organisation's identity provider — authorization code with PKCE (S256),
// the page a public client with no secret; the server trades the code for
// a token at the provider (so the page talks to its own origin only) and
// checks it. The token, like a key, stays in this tab's sessionStorage.

let ways = { api_keys: true, oidc: null };

async function loadWays() {
  try {
    const res = await fetch('/v1/auth');
    if (res.ok) ways = await res.json();
  } catch {
    /* the key form, as before */
  }
}

function signIn(message) {
  const d = $('signin');
  $('signin-error').textContent = state.key && message ? message : '';
  const oidc = ways.oidc;
  $('signin-oidc').hidden = !oidc;
  $('signin-keys').hidden = !!oidc && !ways.api_keys;
  $('signin-keys-text').textContent = oidc ? 'Or use an API key.' : 'This server asks for an API key.';
  if (oidc) $('signin-provider').textContent = 'Sign in with ' + new URL(oidc.issuer).host;
  if (!d.open) d.showModal();
  (oidc ? $('signin-provider') : $('signin-key')).focus();
}

const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');

// toProvider sends the person to the provider's sign-in page.
async function toProvider() {
  const o = ways.oidc;
  const verifier = b64url(crypto.getRandomValues(new Uint8Array(48))); // 64 characters
  const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  const st = b64url(crypto.getRandomValues(new Uint8Array(16)));
  const redirect = location.origin + '/';
  sessionStorage.setItem('agentplane.pkce', JSON.stringify({ verifier, state: st, redirect, hash: location.hash }));
  const q = new URLSearchParams({ response_type: 'code', client_id: o.client_id, redirect_uri: redirect, scope: o.scopes.join(' '),
    code_challenge: challenge, code_challenge_method: 'S256', state: st, resource: o.resource });
  location.assign(o.authorization_endpoint + '?' + q);
}

// fromProvider finishes a sign-in the provider sent back (?code=&state=):
// the state must be the one this tab sent; the code is traded once.
async function fromProvider() {
  const q = new URLSearchParams(location.search);
  if (!q.has('code') && !q.has('error')) return;
  const saved = JSON.parse(sessionStorage.getItem('agentplane.pkce') || 'null');
  sessionStorage.removeItem('agentplane.pkce');
  history.replaceState(null, '', '/' + ((saved && saved.hash) || '')); // the code is not kept in the address
  if (q.has('error')) {
    ways.error = `The sign-in was refused: ${q.get('error')} ${q.get('error_description') || ''}`;
    return;
  }
  if (!saved || saved.state !== q.get('state')) {
    ways.error = 'The sign-in did not come from this page (its state differs): sign in again.';
    return;
  }
  try {
    const res = await fetch('/v1/auth/token', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ code: q.get('code'), code_verifier: saved.verifier, redirect_uri: saved.redirect }) });
    const data = await res.json();
    if (!res.ok) throw new Error((data.error && data.error.message) || 'HTTP ' + res.status);
    state.key = data.access_token;
    sessionStorage.setItem('agentplane.key', state.key);
  } catch (e) {
    ways.error = 'The sign-in failed: ' + e.message;
  }
}

$('signin-provider').addEventListener('click', () => toProvider());

$('signin-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const key = $('signin-key').value.trim();
  if (!key) {
    $('signin-error').textContent = 'Enter the API key.';
    return;
  }
  state.key = key;
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
