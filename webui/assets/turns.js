// Turns: what the person sends (typed in the message box, or a button's
// answer) and what the page does with the server's answer — open the
// picker, ask for a confirmation, say why nobody answers.

import { $, randomKey, sleep } from './dom.js';
import { api } from './api.js';
import { downFor, up } from './stream.js';
import { line, llmFailedAt } from './conversation.js';
import { setSnapshot } from './mode.js';
import { openPicker } from './picker.js';
import { offer } from './confirm.js';
import { sessionId } from './sessions.js';

// sendTurn sends a turn of the open session and returns the server's
// answer. A turn the server could not be reached for is sent again under
// the same key (the server runs it once); one refused is said in the
// conversation, and thrown.
export async function sendTurn(body) {
  const session = sessionId();
  if (!session) return;
  const key = randomKey(); // the same key on every retry: the server runs it once
  const path = `/v1/sessions/${encodeURIComponent(session)}/turns`;
  let a;
  for (let attempt = 0; ; attempt++) {
    try {
      a = await api('POST', path, { ...body, ui: true }, { 'Idempotency-Key': key });
      break;
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
  up('send');
  try {
    handleAnswer(a);
  } catch (err) {
    // sent and answered: what the page could not show of the answer is said, not "Not sent"
    console.error('agentplane: the answer to a turn could not be shown:', err, a);
    line('⚠ The answer could not be shown: ' + err.message, 'msg-sys bad draw-error');
  }
  return a;
}

function handleAnswer(a) {
  if (a.snapshot) setSnapshot(a.snapshot);
  const d = a.decision || {};
  if (a.repeated) return;
  if (d.action === 'open_picker') openPicker(d);
  const ci = a.confirm_intent || (a.llm && a.llm.confirm_intent);
  if (ci) {
    const snap = (a.llm && a.llm.snapshot) || a.snapshot;
    offer(ci, snap.version, a.llm && a.llm.question ? a.llm.question : d.question_text);
  }
  if (d.action === 'continue_with_llm' && d.reason_code !== 'confirmation_declined' && !a.llm) {
    line('No LLM is configured on this server, so nobody answers this turn.', 'msg-sys');
  }
  if (a.llm && a.llm.failure && !(llmFailedAt() > a.seq)) line(a.llm.failure, 'msg-sys bad'); // unless its record said so
  if (a.llm && a.llm.snapshot) setSnapshot(a.llm.snapshot);
}

// enableComposer lets the person type, once a session is open.
export function enableComposer() {
  $('composer-text').disabled = false;
  $('send').disabled = false;
  $('composer-text').focus();
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
// the placeholder's hint fits where the box is wide enough
const narrow = matchMedia('(max-width: 560px)');
const placeholder = () => ($('composer-text').placeholder = narrow.matches ? 'Message' : 'Message — Enter sends, Shift+Enter for a new line');
narrow.addEventListener('change', placeholder);
placeholder();
// The Enter that sent a turn is the box's until let go: its keypress and
// repeats must not press a button of a dialog its answer opened.
let sendingEnter = false;
$('composer-text').addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
    ev.preventDefault();
    sendingEnter = true;
    $('composer').requestSubmit();
  }
});
const dropSendingEnter = (ev) => {
  if (ev.key !== 'Enter' || ev.target === $('composer-text')) return;
  if (sendingEnter && (ev.type === 'keypress' || ev.repeat)) {
    ev.preventDefault();
    ev.stopImmediatePropagation();
  } else if (ev.type === 'keydown') {
    sendingEnter = false;
  }
};
window.addEventListener('keydown', dropSendingEnter, true);
window.addEventListener('keypress', dropSendingEnter, true);
window.addEventListener('keyup', (ev) => {
  if (ev.key === 'Enter') sendingEnter = false;
}, true);
// a keypress that still comes for that Enter (synthetic input sends one)
// must not leave a new line behind
$('composer-text').addEventListener('keypress', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey) ev.preventDefault();
});
