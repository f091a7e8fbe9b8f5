package webtest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/agentplane/agentplane/internal/testkit/servetest"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// TestWebPageLauncherOfAnotherMode: in the media example, a launcher of
// the home mode opens the tickets of the support mode. The picker lists
// them (it asked for them in the session's mode and opened empty), the
// picker, its line and the person's choice are titled with the command's
// display name (not its id), and the choice runs in the support mode.
// Then the support mode is gone from the configuration: the page opening
// the session again says so, once.
func TestWebPageLauncherOfAnotherMode(t *testing.T) {
	browser := newBrowser(t)
	media, err := os.ReadFile("../../../examples/media/agentplane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "media.yaml")
	if err := os.WriteFile(cfg, media, 0o644); err != nil {
		t.Fatal(err)
	}
	srv := &server{t: t, bin: servetest.Binary(t), addr: servetest.FreeAddr(t), args: []string{"--config", cfg, "--db", filepath.Join(t.TempDir(), "media.db")}}
	srv.start(t)
	p := newPage(t, browser)
	defer p.noScriptErrors()
	p.run(chromedp.Navigate(srv.url() + "/"))
	p.wait(`document.documentElement.dataset.ready !== undefined && !document.getElementById('composer-text').disabled`)
	p.wait(`document.getElementById('mode').dataset.value === 'home'`)

	p.say("show the tickets")
	p.wait(`document.getElementById('picker').open && document.querySelectorAll('#picker-list [role=option]').length === 3`)
	if got := p.str(`document.getElementById('picker-title').textContent`); got != "Work on a ticket" {
		t.Errorf("the picker is titled %q", got)
	}
	if got := p.str(lastSys); got != "Work on a ticket: choose an item." {
		t.Errorf("the conversation says %q", got)
	}
	p.shot("launcher-target-mode-picker")
	// the filter searches the target mode's catalog too
	p.run(chromedp.SendKeys(chromedp.CSS("#picker-q"), "export"))
	p.wait(`(l => l.length === 1 && l[0].dataset.id === 'T-12')(document.querySelectorAll('#picker-list [role=option]'))`)
	p.run(chromedp.SendKeys(chromedp.CSS("#picker-q"), kb.Enter))
	p.wait(closed("picker"))
	p.wait(`document.getElementById('mode').dataset.value === 'support'`)
	p.wait(`document.getElementById('awc').textContent.includes('Export is slow')`)
	if got := p.str(`[...document.querySelectorAll('#log .msg-user')].pop().textContent`); got != "Work on a ticket: Export is slow" {
		t.Errorf("the person's choice shows as %q", got)
	}
	p.shot("launcher-target-mode-chosen")

	// the configuration changes under the session: its mode is gone, and
	// the page, opening it again, says so
	small := smallConfig(t)
	srv.kill()
	srv.args[1] = small
	srv.start(t)
	p.run(chromedp.Reload())
	p.wait(`document.documentElement.dataset.ready !== undefined && document.getElementById('mode').dataset.value === 'general'`)
	want := `Session resumed: mode "support" is no longer configured; the session continues in the default mode "general".`
	p.wait(lastSys + ` === ` + jsString(want))
	p.shot("resumed-mode-gone")
	// opened again, it fits: nothing more is said
	p.run(chromedp.Reload())
	p.wait(`document.documentElement.dataset.ready !== undefined`)
	if n := eval[int](p, `[...document.querySelectorAll('#log .msg-sys')].filter(l => l.textContent.startsWith('Session resumed')).length`); n != 1 {
		t.Errorf("%d resume lines after a second opening", n)
	}
}
