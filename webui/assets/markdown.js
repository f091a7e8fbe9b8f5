// The LLM's text as Markdown, safely: headings, paragraphs, lists, code
// (fenced and inline), emphasis and links are built as DOM nodes, and every
// piece of text is set as textContent, so no HTML in the text is ever
// parsed. Links keep only http, https and mailto targets and open apart
// (rel="noopener noreferrer"); an image is shown as its alt text, so no
// remote image is ever fetched. The Content-Security-Policy is unchanged.

// render returns a fragment of nodes for the Markdown text.
export function render(text) {
  const frag = document.createDocumentFragment();
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  let para = []; // lines of the paragraph being read
  let list = null; // the list being read: {el, ordered}
  const flush = () => {
    if (para.length) {
      const p = document.createElement('p');
      para.forEach((l, i) => {
        if (i > 0) p.append(document.createElement('br'));
        inline(p, l);
      });
      frag.append(p);
      para = [];
    }
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)/.exec(line);
    if (fence) {
      flush();
      const code = [];
      for (i++; i < lines.length && !lines[i].trimStart().startsWith(fence[1]); i++) code.push(lines[i]);
      const pre = document.createElement('pre');
      const c = document.createElement('code');
      c.textContent = code.join('\n');
      pre.append(c);
      frag.append(pre);
      continue;
    }
    const h = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/.exec(line);
    if (h) {
      flush();
      const el = document.createElement('h' + Math.min(h[1].length + 2, 6)); // h3 and below: a message is no page
      inline(el, h[2]);
      frag.append(el);
      continue;
    }
    const item = /^\s{0,3}(?:([-*+])|(\d{1,9})[.)])\s+(.*)$/.exec(line);
    if (item) {
      const ordered = item[1] === undefined;
      if (para.length) flush();
      if (!list || list.ordered !== ordered) {
        list = { el: document.createElement(ordered ? 'ol' : 'ul'), ordered };
        if (ordered && item[2] !== '1') list.el.start = Number(item[2]);
        frag.append(list.el);
      }
      const li = document.createElement('li');
      inline(li, item[3]);
      list.el.append(li);
      continue;
    }
    if (line.trim() === '') {
      flush();
      continue;
    }
    if (list) list = null; // text after a list starts a paragraph
    para.push(line);
  }
  flush();
  return frag;
}

// A link target is kept only when it is one of these schemes.
const safeLink = /^(https?:\/\/|mailto:)/i;

// inline appends the inline Markdown of text to el: `code`, **strong**,
// *em* or _em_, [text](url), ![alt](url) as its alt text; the rest as text.
// A code span, a link's text and its target have a bounded length, and
// a link's text and target hold no bracket (each stops at the next "["),
// so a line of openers that never close is read in linear time
// (unbounded, a 200 KB line of "[a](" took 29 s and froze the tab).
function inline(el, text) {
  const re = /(?<!`)(`{1,16})([^`]|[^`][\s\S]{0,2000}?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|(?<![\w])_([^_\s][^_]*)_(?![\w])|(!?)\[([^[\]]{0,500})\]\(([^)\s[\]]{0,2000})\)/g;
  let at = 0;
  for (let m; (m = re.exec(text)); ) {
    if (m.index > at) el.append(text.slice(at, m.index));
    at = re.lastIndex;
    if (m[1]) {
      const c = document.createElement('code');
      c.textContent = m[2];
      el.append(c);
    } else if (m[3] !== undefined || m[4] !== undefined) {
      const s = document.createElement('strong');
      s.textContent = m[3] ?? m[4];
      el.append(s);
    } else if (m[5] !== undefined || m[6] !== undefined) {
      const e = document.createElement('em');
      e.textContent = m[5] ?? m[6];
      el.append(e);
    } else if (m[7] === '!') {
      el.append(m[8]); // an image: its alt text, nothing fetched
    } else if (safeLink.test(m[9])) {
      const a = document.createElement('a');
      a.href = m[9];
      a.rel = 'noopener noreferrer';
      a.target = '_blank';
      a.textContent = m[8] || m[9];
      el.append(a);
    } else {
      el.append(m[8] ? `${m[8]} (${m[9]})` : m[9]); // another scheme: shown, not linked
    }
  }
  if (at < text.length) el.append(text.slice(at));
}
