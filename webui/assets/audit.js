// The audit trail: the session's hash chain in the panel, newest first
// and a page at a time, with the server's verification of the whole chain
// and, on demand, a replay against the configuration it runs now. It owns
// the records drawn and the queue of whole-chain reads.

import { $, el, sleep } from './dom.js';
import { api, headers } from './api.js';
import { commandName, modeName } from './mode.js';
import { openPanel } from './panel.js';
import { sessionId } from './sessions.js';

// AUDIT_PAGE is how many records a page of the timeline holds.
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
  const sid = encodeURIComponent(sessionId());
  const view = { oldest: 0, more: true, bad: null, divs: new Map(), loading: null };
  const status = el('p', { class: 'audit-status', id: 'audit-status', role: 'status', text: 'Verifying the chain…' });
  const list = el('ol', { class: 'items timeline', id: 'audit-list', 'aria-label': 'Audit records, newest first' });
  const older = el('button', { type: 'button', id: 'audit-older', text: 'Show older records', hidden: true });
  const replayOut = el('div', { id: 'audit-replay', 'aria-live': 'polite' });
  const replayBtn = el('button', { type: 'button', id: 'audit-replay-run', text: 'Replay' });
  const currentBtn = el('button', { type: 'button', id: 'audit-replay-current', text: 'Replay on the current configuration' });
  openPanel('audit', 'Audit trail', status, el('div', { class: 'actions' }, replayBtn, currentBtn), replayOut, list, el('div', { class: 'actions' }, older));

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
  // read is the records below before (0: the chain's end), oldest first,
  // or null when they could not be read (said in the list).
  const read = async (before, limit) => {
    const q = before ? `&before=${before}` : '';
    let text;
    try {
      const res = await fetch(`/v1/sessions/${sid}/audit?limit=${limit}${q}`, { headers: headers() });
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      text = await res.text();
    } catch (e) {
      list.append(el('li', { class: 'error', text: 'The records could not be read: ' + e.message }));
      return null;
    }
    return text.split('\n').filter(Boolean).map((l) => JSON.parse(l));
  };
  const page = async (limit = AUDIT_PAGE) => {
    const recs = await read(view.oldest, limit);
    if (!recs) return;
    if (recs.length) view.oldest = recs[0].seq;
    view.more = recs.length === limit && view.oldest > 1;
    for (const r of recs.reverse()) {
      const li = drawRecord(r);
      list.append(li);
      mark(li);
    }
    older.hidden = !view.more;
  };
  const more = (limit) => (view.loading = view.loading || page(limit).finally(() => (view.loading = null)));
  // A record far back is read with the records around it, not with every
  // record between (ten pages of 1,000 took 30 s on a loaded machine):
  // what is between is a gap, a line that reads it, newest first, a page
  // at a time when asked.
  const gapText = (g) => `Records #${g.low}–#${g.high} are not shown. `;
  const fillGap = async (limit = AUDIT_PAGE) => {
    const g = view.gap;
    const recs = await read(g.high + 1, Math.min(limit, g.high - g.low + 1));
    if (!recs || view.gap !== g) return false;
    recs.reverse(); // newest first
    for (const r of recs) {
      const li = drawRecord(r);
      g.li.before(li);
      mark(li);
    }
    g.high = recs.length ? recs[recs.length - 1].seq - 1 : g.low - 1;
    if (g.high < g.low) {
      g.li.remove();
      view.gap = null;
    } else g.text.textContent = gapText(g);
    return recs.length > 0;
  };
  const jump = async (seq) => {
    const low = seq + AUDIT_PAGE / 2 + 1; // the page read ends at seq + 25
    if (view.gap) {
      while (view.gap.li.nextSibling) view.gap.li.nextSibling.remove(); // in the gap now, read again by Show older records
      view.gap.low = low;
    } else {
      const g = { low, high: view.oldest - 1, text: el('span') };
      g.li = el('li', { class: 'gap muted' }, g.text, el('button', { type: 'button', class: 'show-gap', text: 'Show the newest of them', onclick: () => fillGap() }));
      view.gap = g;
      list.append(g.li);
    }
    view.gap.text.textContent = gapText(view.gap);
    view.oldest = low;
    await more(AUDIT_PAGE);
  };
  // showRecord draws the record if it is not drawn, and shows it
  const showRecord = async (seq) => {
    if (view.loading) await view.loading;
    const g = view.gap;
    if (!list.querySelector(`[data-seq="${seq}"]`)) {
      if (g && seq >= g.low && seq <= g.high) {
        if (g.high - seq <= 1000) while (view.gap === g && g.high >= seq && (await fillGap(Math.min(1000, g.high - seq + AUDIT_PAGE))));
        else await jump(seq);
      } else if (view.oldest - seq > 1000) await jump(seq);
      else while (view.more && view.oldest > seq) await more(Math.min(1000, view.oldest - seq + AUDIT_PAGE));
    }
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

  // replay: each record on the configuration that decided it, or every
  // record on the one the server runs now (current: what it would do
  // differently today)
  const replay = async (current) => {
    replayBtn.disabled = currentBtn.disabled = true;
    replayOut.replaceChildren(el('p', { class: 'muted', text: 'Replaying…' }));
    const how = current ? 'on the current configuration' : 'each on the configuration that decided it';
    try {
      const r = await chainRead(`/v1/sessions/${sid}/audit/replay${current ? '?against=current' : ''}`);
      view.divs.clear();
      for (const d of r.divergences) view.divs.set(d.seq, [...(view.divs.get(d.seq) || []), d]);
      const out = [
        el('p', {
          class: r.divergences.length ? 'audit-status bad' : 'audit-status ok',
          text: r.divergences.length
            ? `Replayed ${r.records} records, ${how}: ${r.total} divergence${r.total === 1 ? '' : 's'}.`
            : `Replayed ${r.records} records, ${how}: it does everything the same way.`,
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
      replayBtn.disabled = currentBtn.disabled = false;
    }
  };
  replayBtn.addEventListener('click', () => replay(false));
  currentBtn.addEventListener('click', () => replay(true));
}

const clip = (t) => (t && t.length > 800 ? t.slice(0, 800) + ' …' : t || '');

const kindNames = { open: 'Session opened', resume: 'Resumed', turn: 'Turn', execution: 'Execution', llm: 'LLM exchange', proposal: 'LLM proposal', notice: 'Notice' };

// drawRecord is a record of the chain as auditRecord draws it, or, when
// it cannot, the record as written, with why it could not (logged too).
function drawRecord(r) {
  try {
    return auditRecord(r);
  } catch (err) {
    console.error(`agentplane: audit record #${r.seq} (${r.kind}) could not be drawn:`, err);
    return el(
      'li',
      { 'data-seq': r.seq },
      el('div', { class: 'error draw-error', text: `#${r.seq} (${r.kind}) could not be shown: ${err.message}` }),
      el('details', { class: 'why' }, el('summary', { text: 'The record as written' }), el('pre', { class: 'args', text: clip(JSON.stringify(r, null, 1)) })),
    );
  }
}

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

$('open-audit').addEventListener('click', () => sessionId() && showAudit());
