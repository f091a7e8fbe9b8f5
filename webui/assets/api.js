// The /v1 API: requests with the person's credential (an API key or the
// identity provider's token, kept in the tab's sessionStorage and sent as
// a bearer token), answered with JSON or an APIError.

let key = sessionStorage.getItem('agentplane.key') || '';
let unauthorized = () => {}; // what a 401 does: set by the page to ask the person to sign in

// setKey keeps the credential for this tab.
export function setKey(k) {
  key = k;
  sessionStorage.setItem('agentplane.key', k);
}

// signedIn reports whether the tab holds a credential.
export const signedIn = () => key !== '';

// onUnauthorized sets what a 401 answer does (message: the server's).
export function onUnauthorized(fn) {
  unauthorized = fn;
}

// askSignIn is what a 401 does, for the event streams.
export function askSignIn(message) {
  unauthorized(message);
}

export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// headers are a request's headers with the credential.
export function headers(extra) {
  const h = { ...extra };
  if (key) h.Authorization = 'Bearer ' + key;
  return h;
}

// api sends a request and returns its JSON, or throws an APIError with
// the server's code and message (status 0: the server cannot be reached).
export async function api(method, path, body, extra = {}) {
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
    if (res.status === 401) unauthorized(err.message);
    throw new APIError(res.status, err.code || 'http_' + res.status, err.message || `The server answered ${res.status} ${res.statusText}.`);
  }
  return data;
}
