// The inbox: the person's notifications and the unread badge. It is read
// once; new notifications then come on the session's stream (one
// connection per page: browsers allow six per server, shared by every tab).

import { $, el } from './dom.js';
import { api } from './api.js';
import { openPanel, panelShows } from './panel.js';

const inbox = new Map(); // notification id -> notification

const unread = (n) => n.state !== 'DELIVERED' && n.state !== 'FAILED';

function inboxBadge() {
  const count = [...inbox.values()].filter(unread).length;
  const b = $('inbox-badge');
  b.textContent = count > 99 ? '99+' : String(count);
  b.hidden = count === 0;
  $('open-inbox').setAttribute('aria-label', count ? `Inbox, ${count} unread` : 'Inbox');
}

// inboxServed reports whether this server has notifications.
export const inboxServed = () => !$('open-inbox').hidden;

// loadInbox reads the inbox.
export async function loadInbox() {
  try {
    const r = await api('GET', '/v1/inbox?limit=100');
    for (const n of r.notifications) inbox.set(n.id, n);
  } catch (e) {
    if (e.status === 404) $('open-inbox').hidden = true; // no notifications on this server
    return;
  }
  inboxBadge();
}

// onNotification is a notification from the session's stream.
export function onNotification(n) {
  inbox.set(n.id, n);
  inboxBadge();
  if (panelShows('inbox')) showInbox();
}

async function showInbox() {
  const list = [...inbox.values()].sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
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
        inbox.set(n.id, await api('POST', `/v1/notifications/${encodeURIComponent(n.id)}/ack`));
      } catch {
        /* stays unread; acked next time */
      }
    }),
  );
  inboxBadge();
}

$('open-inbox').addEventListener('click', showInbox);
