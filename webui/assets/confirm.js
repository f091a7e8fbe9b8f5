// The confirmation dialog: asks before the session runs what needs the
// person's yes. It owns the intent offered for confirmation (its token
// never leaves the page) and which question group of the conversation
// the dialog answers.

import { $, backToComposer, closeDialog, openModal, randomKey } from './dom.js';
import { api } from './api.js';
import { answered, confirmGroup, line } from './conversation.js';
import { refreshSnapshot, snapshot } from './mode.js';
import { sendTurn } from './turns.js';
import { sessionId } from './sessions.js';

let pending = null; // {intent, version}: the confirm button's intent
let confirmBox = null; // the conversation's group the dialog was opened for
// answeredEarly: the dialog was answered before the conversation drew
// the question's line (the answer to the turn came before its event)
let answeredEarly = false;

// reset forgets the intent offered, for another session.
export function reset() {
  pending = null;
}

// offer opens the dialog for an intent the server asks to confirm, at the
// session's version it was offered for.
export function offer(intent, version, question) {
  pending = { intent, version };
  openConfirm(question);
}

// takeAnsweredEarly reports (once) that the dialog was answered before
// the question's line was drawn: the line is drawn answered.
export function takeAnsweredEarly() {
  const early = answeredEarly;
  answeredEarly = false;
  return early;
}

// openConfirm asks in the dialog; box is the conversation's group of the
// same question, answered with it.
export function openConfirm(question, box = null) {
  confirmBox = box || confirmGroup();
  $('confirm-text').textContent = question || 'Go ahead?';
  if (!$('confirm').open) openModal($('confirm'));
  $('confirm-no').focus(); // the safe answer is the default
}

// confirmTarget is the conversation's group of the question the dialog
// answers, looked up when it is answered: the line may have been drawn
// between the dialog's opening (the turn's answer) and the click (its
// event came in meanwhile), and every earlier group was retired by the
// turn, so the live confirmation group is this question's.
function confirmTarget() {
  if (confirmBox && confirmBox.isConnected) return confirmBox;
  return confirmGroup();
}

async function confirmYes() {
  closeDialog($('confirm'));
  const box = confirmTarget();
  answered(box);
  answeredEarly = !box;
  const snap = snapshot();
  const pc = snap && snap.pending_confirmation;
  const c = pending;
  pending = null;
  if (c && snap && c.version === snap.version) {
    try {
      const r = await api('POST', `/v1/sessions/${encodeURIComponent(sessionId())}/intents`, c.intent, { 'Idempotency-Key': randomKey() });
      if (r && r.snapshot_id) refreshSnapshot();
    } catch (e) {
      line('Not confirmed: ' + e.message, 'msg-sys bad');
    }
    return;
  }
  if (pc) sendTurn({ text: 'yes' }).catch(() => {}); // no token in this page (it reloaded): the human's yes, in a turn
}

// decline answers no: in the dialog, or by a question's Cancel button.
export function decline(box = confirmTarget()) {
  closeDialog($('confirm'));
  answered(box);
  answeredEarly = !box;
  pending = null;
  sendTurn({ text: 'no' }).catch(() => {});
}

$('confirm-yes').addEventListener('click', confirmYes);
$('confirm-no').addEventListener('click', () => decline());
$('confirm').addEventListener('close', backToComposer);
