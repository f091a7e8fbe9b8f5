// agentplane's web page, the entry: it wires the page's sections (each a
// module with its own state, listed in docs/webui.md) and starts. No
// framework, no build step: the page is a client of the /v1 API like any
// other. Text from people, catalogs and tools is only ever set as
// textContent.

import { api, onUnauthorized } from './api.js';
import { line } from './conversation.js';
import { loadModes } from './mode.js';
import { loadInbox } from './inbox.js';
import { loadWorkflows } from './workflows.js';
import { newSession, openSession, sessionId } from './sessions.js';
import { arrive, onSignedIn, signIn } from './signin.js';
import './audit.js';

let started = false; // a session was opened
let arrived = false; // the ways to sign in were read

onUnauthorized(signIn);
onSignedIn(() => {
  if (!started) start();
  else if (sessionId()) openSession(sessionId());
});

async function start() {
  if (!started && !arrived) {
    arrived = true;
    if (!(await arrive())) return;
  }
  // the key is checked while the modes and the inbox load
  const [check] = await Promise.allSettled([api('GET', '/v1/sessions?limit=1'), loadModes(), loadInbox()]);
  if (check.status === 'rejected') {
    if (check.reason.status !== 401) line('The server cannot be used: ' + check.reason.message, 'msg-sys bad');
    return;
  }
  started = true;
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

start();
