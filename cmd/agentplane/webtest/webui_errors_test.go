package webtest

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/servetest"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// mangleHistory stands in the page for a server that sends records this
// page cannot draw: it rewrites the newest page of history (the first
// GET …/history of each load) on its way from the real server to the
// page's script — the session's first record (open) becomes one of a kind
// the page does not know, and its first turn one whose question has
// options that are not a list. Nothing in the page's own code is there
// for the test.
const mangleHistory = `(() => {
  const real = window.fetch;
  window.fetch = async (input, init) => {
    const res = await real(input, init);
    const url = String(input);
    if (!url.includes('/history?') || url.includes('before=')) return res;
    const page = await res.json();
    for (const e of page.events) {
      if (e.kind === 'open') e.kind = 'from_the_future';
      else if (e.kind === 'turn' && !page.mangled) {
        page.mangled = true;
        e.decision = { action: 'ask_clarifying_question', question_text: 'Which one?', options: 7 };
      }
    }
    return new Response(JSON.stringify(page), { status: res.status, headers: res.headers });
  };
})();`

// TestWebPageDrawErrors: events the page cannot draw are logged
// (console.error) and said in the conversation, one line each, in their
// place; everything else is drawn, and the page goes on working.
func TestWebPageDrawErrors(t *testing.T) {
	browser := newBrowser(t)
	cfg := smallConfig(t)
	srv := &server{t: t, bin: servetest.Binary(t), addr: servetest.FreeAddr(t), args: []string{"--config", cfg, "--db", filepath.Join(t.TempDir(), "ui.db")}}
	srv.start(t)
	p := newPage(t, browser)
	defer p.noScriptErrors()
	var mu sync.Mutex
	var logged []string // what the page wrote with console.error
	if err := chromedp.Listen(p.ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventConsoleAPICalled); ok && e.Type == runtime.ConsoleAPICalledTypeError && len(e.Args) > 0 {
			mu.Lock()
			logged = append(logged, string(e.Args[0].Value))
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(p.ctx, cdppage.AddScriptToEvaluateOnNewDocument, cdppage.AddScriptToEvaluateOnNewDocumentParams{Source: mangleHistory}); err != nil {
		t.Fatal(err)
	}
	drawErrors := `[...document.querySelectorAll('#log .draw-error')].map(l => l.textContent)`
	ready := `document.documentElement.dataset.ready !== undefined && !document.getElementById('composer-text').disabled`

	// a new session: its one record, of a kind the page does not know
	p.run(chromedp.Navigate(srv.url() + "/"))
	p.wait(ready)
	p.wait(`document.querySelectorAll('#log .draw-error').length === 1`)
	got := eval[[]string](p, drawErrors)
	if want := `⚠ Event #1 (from_the_future) could not be shown: this page does not know records of kind “from_the_future”`; got[0] != want {
		t.Errorf("the line says %q, want %q", got[0], want)
	}
	// the page works: a turn is sent, and drawn from the stream
	p.say("hello there")
	p.wait(`[...document.querySelectorAll('#log .msg-user')].some(l => l.textContent === 'hello there')`)
	p.wait(`document.getElementById('log').textContent.includes('→ the assistant (no control intent)')`)

	// opened again: the turn's record cannot be drawn either; what comes
	// after it is, and the page still works
	p.run(chromedp.Reload())
	p.wait(ready)
	p.wait(`document.querySelectorAll('#log .draw-error').length === 2`)
	got = eval[[]string](p, drawErrors)
	if !strings.HasPrefix(got[1], "⚠ Event #2 (turn) could not be shown: ") {
		t.Errorf("the turn's line says %q", got[1])
	}
	if seqs := p.str(`[...document.querySelectorAll('#log .draw-error')].map(l => l.dataset.seq).join(',')`); seqs != "1,2" {
		t.Errorf("the lines are of events %s, want 1,2", seqs)
	}
	p.say("switch to general mode")
	p.wait(`[...document.querySelectorAll('#log .msg-user')].some(l => l.textContent === 'switch to general mode')`)
	p.shot("draw-errors")

	mu.Lock()
	defer mu.Unlock()
	var drawn int
	for _, l := range logged {
		if strings.Contains(l, "could not be drawn") {
			drawn++
		}
	}
	if drawn != 3 { // #1 on the first load, #1 and #2 on the second
		t.Errorf("the page logged %d draw errors, want 3: %q", drawn, logged)
	}
}

// smallConfig writes a configuration of one mode, general, whose only
// command switches modes, and returns its path.
func smallConfig(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "small.yaml")
	if err := os.WriteFile(p, []byte(`version: 1
modes:
  - {key: general, display_name: General, default: true, toolboxes: [core]}
toolboxes: [{id: core, catalogs: [modes], commands: [set_mode]}]
commands:
  - {id: set_mode, tool: agent_set_mode, parameter: mode, resolver: {catalog: modes}, sets_session_mode: true, triggers: ["switch to {item} mode"]}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
