// The event streams and the connection line: Server-Sent Events read
// over fetch (EventSource cannot send the API key), and "Connection lost"
// while any stream, or a turn being sent, is cut off.

import { $, sleep } from './dom.js';
import { askSignIn, headers } from './api.js';

const down = new Map(); // stream -> retry delay, while it is disconnected

// up says that name (a stream, or 'send') reaches the server again.
export function up(name) {
  down.delete(name);
  showConnection();
}

// downFor says that name is cut off and tried again every delay ms.
export function downFor(name, delay) {
  down.set(name, delay);
  showConnection();
}

function showConnection() {
  const conn = $('conn');
  if (!down.size) {
    conn.textContent = '';
    document.body.dataset.connection = 'up';
    return;
  }
  const secs = Math.max(...down.values()) / 1000;
  conn.textContent = `Connection lost — retrying every ${secs < 1 ? secs.toFixed(1) : Math.round(secs)} s…`;
  document.body.dataset.connection = 'down';
}

// stream follows a Server-Sent Events endpoint, reconnecting with
// Last-Event-ID after a lost connection, with backoff, until stopped (it
// returns the function that stops it). A "closed" event from the server
// ends it when final is set (the workflow has ended), and otherwise
// reconnects (the server is draining). An event onEvent throws on is
// logged and the stream goes on.
export function stream(path, { after = () => 0, onEvent, onOpen, name, final = false }) {
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
          askSignIn();
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
            } catch (err) {
              console.error(`agentplane: the ${name} stream's event ${ev.event} #${ev.id} could not be handled:`, err);
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
