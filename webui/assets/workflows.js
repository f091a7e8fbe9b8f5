// Workflows: the list with a badge for those waiting for the person, and
// one workflow at a time in the panel — its tasks by layer, the approval,
// decision or interruption it waits on, and its events as they come. It
// owns the workflow shown, its event stream, and the fields the person
// types in.

import { $, el } from './dom.js';
import { api } from './api.js';
import { stream } from './stream.js';
import { onPanelClose, openPanel, panelShows } from './panel.js';

let stop = null; // stops the event stream of the workflow shown
let shownId = ''; // the workflow the panel shows

onPanelClose(() => {
  shownId = '';
  if (stop) stop();
  stop = null;
});

const waiting = (w) => ['awaiting_approval', 'awaiting_decision', 'interrupted'].includes(w.status);

// loadWorkflows reads the workflows and shows how many wait for the person.
export async function loadWorkflows() {
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
  if (stop) stop();
  stop = null;
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
const shown = (id) => panelShows('workflow') && shownId === id;

// wfView is what stays while the panel shows one workflow: the fields
// the person types in and the events list (a redraw moves them, so text,
// caret and focus survive), and the workflow's event stream.
let wfView = null;

function workflowView(id) {
  if (wfView && wfView.id === id && shown(id)) return wfView;
  if (stop) stop();
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
  stop = stream(`/v1/workflows/${encodeURIComponent(id)}/events`, {
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
  shownId = id;
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
