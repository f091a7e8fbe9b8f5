// Sign-in. Two ways in, as the server says (GET /v1/auth): an API key, or
// the organisation's identity provider — authorization code with PKCE
// (S256), the page a public client with no secret; the server trades the
// code for a token at the provider (so the page talks to its own origin
// only) and checks it. The token, like a key, stays in this tab's
// sessionStorage (api.js keeps it). This module owns the ways in and the
// sign-in dialog.

import { $ } from './dom.js';
import { setKey, signedIn } from './api.js';

let ways = { api_keys: true, oidc: null };
let signedInNow = () => {}; // what a key entered in the dialog does: set by the page

// onSignedIn sets what the page does once the person has entered a key.
export function onSignedIn(fn) {
  signedInNow = fn;
}

// arrive reads the ways in and finishes a sign-in the provider sent the
// page back from; false (with the dialog open, saying why) when it failed.
export async function arrive() {
  await loadWays();
  await fromProvider();
  if (!ways.error) return true;
  signIn();
  $('signin-error').textContent = ways.error;
  return false;
}

async function loadWays() {
  try {
    const res = await fetch('/v1/auth');
    if (res.ok) ways = await res.json();
  } catch {
    /* the key form, as before */
  }
}

// signIn opens the sign-in dialog; message is the server's, shown when a
// credential was refused.
export function signIn(message) {
  const d = $('signin');
  $('signin-error').textContent = signedIn() && message ? message : '';
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
    setKey(data.access_token);
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
  setKey(key);
  $('signin-key').value = '';
  $('signin').close();
  signedInNow();
});
$('signin').addEventListener('cancel', (ev) => ev.preventDefault()); // nothing works without a key

// signOut forgets the credential and the session, and starts again.
export function signOut() {
  sessionStorage.removeItem('agentplane.key');
  localStorage.removeItem('agentplane.session');
  location.hash = '';
  location.reload();
}
