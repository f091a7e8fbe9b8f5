package webtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/gate"
	"github.com/agentplane/agentplane/internal/testkit/demotest"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
	"github.com/agentplane/agentplane/store/sqlite"
)

// click presses the mouse on the middle of an element, as a person does:
// real pointer events through the DevTools protocol (pressed and released
// at the element's place), not element.click(). An element redrawn between
// the lookup and the click is looked up again.
func click[S chromedp.Selectable](p *page, sel S) {
	p.t.Helper()
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
		err := chromedp.Do(ctx, chromedp.Click(sel))
		cancel()
		if err == nil {
			return
		}
		if try == 3 || !strings.Contains(err.Error(), "Could not find node") && !strings.Contains(err.Error(), "invalid dimensions") {
			p.t.Fatalf("browser: click %v: %v", sel, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// typed types text into whatever has the focus — nothing puts it in the
// message box first — and checks that it got there; the box is then
// emptied.
func (p *page) typed(text string) {
	p.t.Helper()
	p.run(chromedp.KeyEvent(text))
	if got := p.str(`document.getElementById('composer-text').value`); got != text {
		p.t.Fatalf("typed %q after the click, the message box holds %q (focus on %s)", text, got, p.str(`document.activeElement.id || document.activeElement.tagName`))
	}
	p.js(`(b => { b.value = ''; b.dispatchEvent(new Event('input')); })(document.getElementById('composer-text'))`)
}

// fits is the condition that the page does not scroll: the document is
// no larger than the viewport.
const fits = `document.documentElement.scrollHeight <= innerHeight && document.documentElement.scrollWidth <= innerWidth`

// allAnswered is the condition that no control in the conversation can
// answer any more.
const allAnswered = `[...document.querySelectorAll('#log .choices button')].every(b => b.disabled)`

// TestWebPageMouse drives the page with the mouse alone, flow by flow as
// TestWebPage does with keys: after each click that closes something,
// typing reaches the message box.
func TestWebPageMouse(t *testing.T) {
	browser := newBrowser(t)
	out := servetest.NewOutbox(t, 700*time.Millisecond) // a send takes a while: what the page does before its answer shows
	db := filepath.Join(t.TempDir(), "ui.db")
	srv := &server{t: t, bin: servetest.Binary(t), addr: servetest.FreeAddr(t),
		args: []string{"--config", uiConfig(t, out, ""), "--db", db, "--workflow-lease", "1s"}}
	srv.start(t)
	p := newPage(t, browser)
	defer p.noScriptErrors()
	p.run(chromedp.EmulateViewport(1280, 900), chromedp.Navigate(srv.url()+"/"))
	p.wait(`document.documentElement.dataset.ready !== undefined && !document.getElementById('composer-text').disabled`)
	session := p.str(`new URLSearchParams(location.hash.slice(1)).get('s')`)

	t.Run("the first screen and the page's size", func(t *testing.T) {
		p.t = t
		// a new session says what to type: its mode's examples, as buttons
		p.wait(`document.querySelectorAll('#hint button').length >= 2`)
		hints := eval[[]string](p, `[...document.querySelectorAll('#hint button')].map(b => b.textContent)`)
		if hints[0] != "I want to work on the email templates" {
			t.Fatalf("the first hint is %q (hints %q): a launcher's first trigger comes first", hints[0], hints)
		}
		for _, size := range [][2]int64{{1280, 900}, {1440, 900}, {375, 812}} {
			p.run(chromedp.EmulateViewport(size[0], size[1]))
			p.wait(fits)
			// the placeholder is not cut (once the page has seen the new width)
			p.wait(`(b => { const c = document.createElement('canvas').getContext('2d'); const st = getComputedStyle(b);
				c.font = st.font; return c.measureText(b.placeholder).width <= b.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight); })(document.getElementById('composer-text'))`)
			p.shot(fmt.Sprintf("mouse-start-%dx%d", size[0], size[1]))
		}
		p.run(chromedp.EmulateViewport(1280, 900))
	})

	t.Run("picker: a hint, then an option, by mouse", func(t *testing.T) {
		p.t = t
		click(p, `//li[@id="hint"]//button[text()="I want to work on the email templates"]`)
		p.wait(`document.getElementById('picker').open && document.querySelectorAll('#picker-list [role=option]').length >= 4`)
		if p.str(`String(document.getElementById('hint'))`) != "null" {
			t.Fatal("the hint stays after the first turn")
		}
		click(p, `//li[@role="option" and @data-id="TPL-123"]`)
		p.wait(`!document.getElementById('picker').open`)
		p.typed("hello")
		p.wait(`document.getElementById('awc').textContent.includes('Q1 CFO Outreach')`)
		// the entity type by its configured name, here and in the message
		if got := p.str(`document.querySelector('#awc .muted').textContent`); got != "email template · TPL-123" {
			t.Fatalf("the work context shows %q", got)
		}
		p.wait(lastSys + ` === '✓ Now working on email template Q1 CFO Outreach (TPL-123).'`)
		// the picker's Choose… is answered
		p.wait(allAnswered)
		p.wait(fits)
	})

	t.Run("mode switcher by mouse", func(t *testing.T) {
		p.t = t
		click(p, "#mode")
		p.wait(`document.getElementById('mode-list').matches(':popover-open')`)
		p.shot("mouse-modes")
		click(p, `//ul[@id="mode-list"]/li[text()="Sales"]`)
		p.wait(`!document.getElementById('mode-list').matches(':popover-open')`)
		p.typed("hello")
		p.wait(`document.getElementById('mode').dataset.value === 'sales' && document.getElementById('mode-name').textContent === 'Sales'`)
		// a click elsewhere closes the list and changes nothing
		click(p, "#mode")
		p.wait(`document.getElementById('mode-list').matches(':popover-open')`)
		click(p, "#log")
		p.wait(`!document.getElementById('mode-list').matches(':popover-open')`)
		if got := p.str(`document.getElementById('mode').dataset.value`); got != "sales" {
			t.Fatalf("a click elsewhere switched the mode to %q", got)
		}
	})

	t.Run("confirmation dialog by mouse", func(t *testing.T) {
		p.t = t
		p.say("send this to the Q1 pilot list")
		p.wait(`document.getElementById('confirm').open`)
		click(p, "#confirm-yes")
		p.wait(`!document.getElementById('confirm').open`)
		// the question's buttons are answered at once, before the server says so
		// (the send is still held: its answer has not come)
		if !eval[bool](p, allAnswered+` && !(`+lastSys+`).includes('Q1 pilot list — done')`) {
			t.Fatal("the answered confirmation's buttons are live while the send runs")
		}
		p.typed("hello")
		p.wait(lastSys + `.includes('Q1 pilot list — done')`)
		if out.Count() != 1 {
			t.Fatalf("%d sends", out.Count())
		}
		// cancelled by mouse
		p.say("send this to the Q1 pilot list")
		p.wait(`document.getElementById('confirm').open`)
		click(p, "#confirm-no")
		p.wait(`!document.getElementById('confirm').open`)
		p.typed("hello")
		p.wait(lastSys + ` === 'Cancelled; nothing was done.'`)
		// dismissed, then confirmed from the conversation's own button
		p.say("send this to the Q1 pilot list")
		p.wait(`document.getElementById('confirm').open`)
		p.run(chromedp.KeyEvent(kb.Escape))
		p.wait(closed("confirm"))
		click(p, `//li[last()]//button[text()="Confirm…"]`)
		p.wait(`document.getElementById('confirm').open`)
		click(p, "#confirm-yes")
		p.wait(`!document.getElementById('confirm').open`)
		p.typed("hello")
		p.wait(`(` + lastSys + `).includes('Q1 pilot list — done') && ` + allAnswered)
		if out.Count() != 2 {
			t.Fatalf("%d sends", out.Count())
		}
	})

	t.Run("option buttons by mouse", func(t *testing.T) {
		p.t = t
		var created struct {
			SessionID string `json:"session_id"`
		}
		srv.api(t, "POST", "/v1/sessions", "", map[string]any{}, &created)
		srv.api(t, "POST", "/v1/sessions/"+created.SessionID+"/turns", "", map[string]any{"text": "open the outreach template", "ui": false}, nil)
		click(p, "#open-sessions")
		p.wait(`document.getElementById('panel').open && document.querySelectorAll('#panel-body ul.items li').length === 2`)
		click(p, `#panel-body ul.items li:first-child button`)
		p.wait(`new URLSearchParams(location.hash.slice(1)).get('s') === ` + jsString(created.SessionID) + ` && !document.getElementById('panel').open`)
		p.typed("hello")
		p.wait(`[...document.querySelectorAll('#log .choices button')].some(b => b.textContent === 'Q1 CTO Outreach' && !b.disabled)`)
		click(p, `//button[text()="Q1 CTO Outreach"]`)
		if !eval[bool](p, allAnswered) {
			t.Fatal("the options stay live after one was clicked")
		}
		p.typed("hello")
		p.wait(`document.getElementById('awc').textContent.includes('Q1 CTO Outreach')`)
		// the clear button, by mouse
		click(p, "#awc-clear")
		p.wait(`document.getElementById('awc').textContent.includes('Nothing is open')`)
		p.typed("hello")
		// after a reload, what was answered stays answered
		p.run(chromedp.Reload())
		p.wait(`document.documentElement.dataset.ready !== undefined && document.querySelectorAll('#log .choices button').length > 0`)
		if !eval[bool](p, allAnswered) {
			t.Fatal("after a reload, answered controls are live again")
		}
		click(p, "#open-sessions")
		p.wait(`document.getElementById('panel').open && document.querySelectorAll('#panel-body ul.items li').length === 2`)
		click(p, `//li[contains(., 'Sales')]/button[text()="Open"]`)
		p.wait(`new URLSearchParams(location.hash.slice(1)).get('s') === ` + jsString(session))
		p.wait(`document.querySelectorAll('#log .choices button').length >= 4`)
		if !eval[bool](p, allAnswered) {
			t.Fatal("after a reload, answered controls are live again")
		}
	})

	t.Run("inbox by mouse", func(t *testing.T) {
		p.t = t
		srv.api(t, "POST", "/v1/notifications", "", map[string]any{"address": "USER", "target": "USER", "handler": "SYSTEM", "title": "Invoice ready"}, nil)
		p.wait(`!document.getElementById('inbox-badge').hidden`)
		click(p, "#open-inbox")
		p.wait(`document.getElementById('panel').open && document.getElementById('panel-body').textContent.includes('Invoice ready')`)
		p.wait(`document.getElementById('inbox-badge').hidden`)
		click(p, "#panel-close")
		p.wait(`!document.getElementById('panel').open`)
		p.typed("hello")
	})

	t.Run("workflow approval by mouse", func(t *testing.T) {
		p.t = t
		id := srv.startWorkflow(t, session, map[string]any{"name": "Send by mouse", "wait": true, "tasks": []any{
			map[string]any{"id": "send", "tool": "send_template", "args": map[string]any{"list_id": "LIST-9"}},
		}})
		click(p, "#open-workflows")
		p.wait(`document.getElementById('panel').open && document.getElementById('panel-body').textContent.includes('Send by mouse')`)
		click(p, `//li[contains(., 'Send by mouse')]/button`)
		p.wait(`document.getElementById('panel-body').textContent.includes('Approval needed for layer 1')`)
		click(p, `//button[text()="Approve"]`)
		p.wait(`(e => e && e.dataset.status === 'completed')(document.querySelector('#panel-body [data-status]'))`)
		click(p, "#panel-close")
		p.wait(`!document.getElementById('panel').open`)
		p.typed("hello")
		var wf struct{ Status string }
		srv.api(t, "GET", "/v1/workflows/"+id, "", nil, &wf)
		if wf.Status != "completed" || out.Count() != 3 {
			t.Fatalf("approved by mouse: %s, %d sends", wf.Status, out.Count())
		}
		// a decision between layers: continued, then aborted, by mouse
		decided := srv.startWorkflow(t, session, map[string]any{"name": "Decide by mouse", "wait": true, "per_layer_validation": true, "tasks": []any{
			map[string]any{"id": "one", "tool": "catalog_search", "args": map[string]any{"catalog_id": "email_templates", "query": "outreach"}},
			map[string]any{"id": "two", "tool": "catalog_search", "args": map[string]any{"catalog_id": "email_templates", "query": "renewal"}, "depends_on": []string{"one"}},
		}})
		click(p, "#open-workflows")
		p.wait(`document.getElementById('panel').open && document.getElementById('panel-body').textContent.includes('Decide by mouse')`)
		click(p, `//li[contains(., 'Decide by mouse')]/button`)
		p.wait(`document.getElementById('panel-body').textContent.includes('Layer 1 is done: go on?')`)
		click(p, `//button[text()="Continue"]`)
		p.wait(`document.getElementById('panel-body').textContent.includes('Layer 2 is done: go on?')`)
		click(p, "#wf-feedback")
		p.run(chromedp.KeyEvent("enough"))
		click(p, `//button[text()="Abort"]`)
		p.wait(`(e => e && e.dataset.status === 'aborted')(document.querySelector('#panel-body [data-status]'))`)
		click(p, "#panel-close")
		p.wait(`!document.getElementById('panel').open`)
		p.typed("hello")
		var dwf struct{ Status, Reason string }
		srv.api(t, "GET", "/v1/workflows/"+decided, "", nil, &dwf)
		if dwf.Status != "aborted" || dwf.Reason != "enough" {
			t.Fatalf("decided by mouse: %+v", dwf)
		}
	})

	t.Run("modify an interrupted workflow", func(t *testing.T) {
		p.t = t
		id := srv.startWorkflow(t, session, map[string]any{"name": "Report then search", "tasks": []any{
			map[string]any{"id": "report", "tool": "slow_report"},
			map[string]any{"id": "find", "tool": "catalog_search", "args": map[string]any{"catalog_id": "email_templates", "query": "outreach"}, "depends_on": []string{"report"}},
			map[string]any{"id": "again", "tool": "catalog_search", "args": map[string]any{"catalog_id": "email_templates", "query": "webinar"}, "depends_on": []string{"report"}},
		}})
		time.Sleep(400 * time.Millisecond)
		srv.kill()
		srv.start(t)
		p.wait(`document.body.dataset.connection === 'up'`)
		click(p, "#open-workflows")
		p.wait(`document.getElementById('panel').open && document.getElementById('panel-body').textContent.includes('Report then search')`)
		click(p, `//li[contains(., 'Report then search')]/button`)
		p.wait(`document.getElementById('panel-body').textContent.includes('Interrupted')`)
		click(p, `//button[text()="Modify…"]`)
		p.wait(`document.getElementById('wf-args-0') !== null && document.activeElement.id === 'wf-args-0'`)
		if got := p.str(`document.getElementById('wf-args-0').dataset.task + ' ' + document.getElementById('wf-args-1').dataset.task`); got != "find again" {
			t.Fatalf("the pending tasks offered: %q", got)
		}
		// not JSON: refused in the page, naming the task
		p.js(`document.getElementById('wf-args-0').value = '{"catalog_id": "email_templates", "query": '`)
		click(p, `//button[text()="Apply and continue"]`)
		p.wait(`document.querySelector('#panel-body .error[role=alert]').textContent.startsWith('Task find: the arguments are not JSON')`)
		// refused by the server, which says why; nothing changes
		p.js(`document.getElementById('wf-args-0').value = '{"catalog_id": "email_templates", "query": "${nope.output}"}'`)
		click(p, `//button[text()="Apply and continue"]`)
		p.wait(`document.querySelector('#panel-body .error[role=alert]').textContent.startsWith('Not done: ')`)
		p.shot("workflow-modify-refused")
		var wf struct {
			Status string
			Tasks  []struct {
				ID, Status string
				Args       map[string]any
			}
		}
		srv.api(t, "GET", "/v1/workflows/"+id, "", nil, &wf)
		if wf.Status != "interrupted" || wf.Tasks[1].Args["query"] != "outreach" {
			t.Fatalf("a refused modification changed the workflow: %+v", wf)
		}
		// a new query for one, the other skipped
		p.js(`document.getElementById('wf-args-0').value = '{"catalog_id": "email_templates", "query": "renewal"}'`)
		click(p, "#wf-skip-1")
		p.wait(`document.getElementById('wf-args-1').disabled`)
		p.shot("workflow-modify")
		click(p, `//button[text()="Apply and continue"]`)
		p.wait(`(e => e && e.dataset.status === 'completed')(document.querySelector('#panel-body [data-status]'))`)
		srv.api(t, "GET", "/v1/workflows/"+id, "", nil, &wf)
		if wf.Status != "completed" || wf.Tasks[1].Status != "completed" || wf.Tasks[1].Args["query"] != "renewal" || wf.Tasks[2].Status != "skipped" {
			t.Fatalf("modified from the page: %+v", wf)
		}
		click(p, "#panel-close")
		p.wait(`!document.getElementById('panel').open`)
		p.typed("hello")
	})

	t.Run("the audit trail", func(t *testing.T) {
		p.t = t
		click(p, "#open-audit")
		p.wait(`document.getElementById('panel').open && document.querySelectorAll('#audit-list > li').length > 5`)
		p.wait(`document.getElementById('audit-status').textContent.startsWith('✓ The chain verifies')`)
		// the newest first; an execution's confirmation, by whom, and its state diff
		first := eval[int64](p, `Number(document.querySelector('#audit-list > li').dataset.seq)`)
		recs := auditRecords(t, srv, session)
		if first != int64(len(recs)) {
			t.Fatalf("the timeline starts at #%d, the chain ends at #%d", first, len(recs))
		}
		if !eval[bool](p, `[...document.querySelectorAll('#audit-list > li')].some(li => li.textContent.includes('Confirmed by local'))`) {
			t.Fatal("no confirmation shown with who confirmed")
		}
		// which configuration decided: its short digest, the record's
		digest, _ := recs[len(recs)-1]["config"].(string)
		if len(digest) != 64 {
			t.Fatalf("the last record names no configuration: %v", recs[len(recs)-1])
		}
		if shown := eval[string](p, `document.querySelector('#audit-list > li .rec-config').textContent`); shown != "config "+digest[:12] {
			t.Fatalf("the newest record shows %q for configuration %s", shown, digest)
		}
		click(p, `//ol[@id="audit-list"]/li[.//text()[contains(., 'agent_set_active_entity') or contains(., 'Now working on')]][1]//summary`)
		p.wait(`[...document.querySelectorAll('#audit-list details[open] li')].some(li => /^(add|replace) \/awc/.test(li.textContent))`)
		click(p, "#audit-replay-run")
		p.wait(`document.getElementById('audit-replay').textContent.includes('it does everything the same way')`)
		p.shot("audit")
		click(p, "#panel-close")
		p.wait(`!document.getElementById('panel').open`)
		p.typed("hello")
	})
}

// longSession writes a session of n audit records into the SQLite file
// at db under the configuration at cfg, as serve would (owned by the
// local user, for a page), and returns its id. It writes with
// synchronous=NORMAL: the test needs the records, not their durability.
func longSession(t *testing.T, cfg, db string, n int) string {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, db, &sqlite.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	yaml, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := demotest.WithYAML(t, yaml, &core.Options{Store: st})
	const id = "long-session"
	if _, err := c.Open(ctx, gate.Opening{SessionID: id, Principal: "local", Owner: "local", UI: true}); err != nil {
		t.Fatal(err)
	}
	texts := []string{"switch to ddr mode", "switch to sales mode", "what is the weather like (%d)"}
	for i := 2; i <= n; i++ {
		text := texts[i%3]
		if strings.Contains(text, "%d") {
			text = fmt.Sprintf(text, i) // a text of its own: a record to find again
		}
		if _, err := c.Turn(ctx, core.TurnRequest{SessionID: id, Principal: "local", Input: agentplane.TurnInput{Text: text, UI: true}}); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// TestWebPageLongSession opens a session of 10,000 records: the page
// draws its newest page at once, earlier ones as the person scrolls up,
// and the audit view shows the chain's first page as fast.
func TestWebPageLongSession(t *testing.T) {
	browser := newBrowser(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "long.db")
	cfg := uiConfig(t, servetest.NewOutbox(t, 0), "")
	const n = 10000
	start := time.Now()
	id := longSession(t, cfg, db, n)
	t.Logf("wrote a session of %d records in %v", n, time.Since(start).Round(time.Millisecond))
	srv := &server{t: t, bin: servetest.Binary(t), addr: servetest.FreeAddr(t), args: []string{"--config", cfg, "--db", db}}
	srv.start(t)
	p := newPage(t, browser)
	defer p.noScriptErrors()
	type load struct {
		Ready       float64
		Lines       int
		Last, First string
		Wire, API   float64
	}
	measure := func(q *page, url string) load {
		q.run(chromedp.EmulateViewport(1280, 900), chromedp.Navigate(url))
		q.wait(`document.documentElement.dataset.ready !== undefined && !document.getElementById('composer-text').disabled`)
		return eval[load](q, `(() => { const log = document.getElementById('log'); const seqs = [...log.querySelectorAll('li[data-seq]')].map(l => l.dataset.seq);
			const res = [performance.getEntriesByType('navigation')[0], ...performance.getEntriesByType('resource')];
			return {Ready: Number(document.documentElement.dataset.ready), Lines: log.children.length, First: seqs[0], Last: seqs[seqs.length - 1],
				Wire: res.reduce((a, e) => a + e.transferSize, 0), API: res.filter(e => e.name.includes('/v1/')).reduce((a, e) => a + e.transferSize, 0)}; })()`)
	}
	// first in a new browser (nothing cached), then in new tabs whose
	// cache holds the files, as for a person who comes back (each load in
	// a tab of its own: a changed fragment is not a navigation)
	cold := measure(p, srv.url()+"/#s="+id)
	t.Logf("first load in a new browser, session of %d records: usable in %.0f ms, %.1f KiB on the wire (%.1f KiB of it the API)", n, cold.Ready, cold.Wire/1024, cold.API/1024)
	if cold.Wire > 100*1024 {
		t.Errorf("the first load took %.1f KiB on the wire", cold.Wire/1024)
	}
	var long, fresh []load
	var created struct {
		SessionID string `json:"session_id"`
	}
	srv.api(t, "POST", "/v1/sessions", "", map[string]any{"ui": true}, &created)
	for range 3 {
		q := newPage(t, p.ctx)
		long = append(long, measure(q, srv.url()+"/#s="+id))
		q.noScriptErrors()
		q.close()
		r := newPage(t, p.ctx)
		fresh = append(fresh, measure(r, srv.url()+"/#s="+created.SessionID))
		r.noScriptErrors()
		r.close()
	}
	l := long[len(long)-1]
	if l.Last != fmt.Sprint(n) || l.Lines > 400 {
		t.Fatalf("the long session opened with %d lines, events %s to %s", l.Lines, l.First, l.Last)
	}
	for i := range long {
		t.Logf("time to a usable chat: new session %.0f ms (%.1f KiB on the wire, %.1f KiB of it the API), session of %d records %.0f ms (%.1f KiB, %.1f KiB API, %d lines drawn)",
			fresh[i].Ready, fresh[i].Wire/1024, fresh[i].API/1024, n, long[i].Ready, long[i].Wire/1024, long[i].API/1024, long[i].Lines)
	}

	// scrolling up draws earlier events, in order, none twice
	p = newPage(t, p.ctx)
	measure(p, srv.url()+"/#s="+id)
	firstBefore := eval[int64](p, `Number(document.querySelector('#log li[data-seq]').dataset.seq)`)
	for range 3 {
		p.js(`document.getElementById('log').scrollTop = 0`)
		p.wait(`Number(document.querySelector('#log li[data-seq]').dataset.seq) < ` + fmt.Sprint(firstBefore))
		firstBefore = eval[int64](p, `Number(document.querySelector('#log li[data-seq]').dataset.seq)`)
	}
	// (a turn draws two lines: what was said and what came of it)
	type drawn struct {
		Seq   int64
		Class string
	}
	lines := eval[[]drawn](p, `[...document.querySelectorAll('#log li[data-seq]')].map(l => ({Seq: Number(l.dataset.seq), Class: l.className}))`)
	seen := map[drawn]bool{}
	for i, l := range lines {
		if seen[l] || i > 0 && l.Seq < lines[i-1].Seq {
			t.Fatalf("line %d, %+v, after %+v: drawn twice or out of order", i, l, lines[i-1])
		}
		seen[l] = true
	}
	if lines[len(lines)-1].Seq != n || lines[0].Seq > n-300 {
		t.Fatalf("after three earlier pages the lines run from %d to %d", lines[0].Seq, lines[len(lines)-1].Seq)
	}
	// the person was not moved: the line they looked at stays in view
	if top := eval[float64](p, `document.getElementById('log').scrollTop`); top < 100 {
		t.Fatalf("after an earlier page the conversation is scrolled to %.0f px: the person lost their place", top)
	}
	// the "Show earlier" button does the same, by mouse
	click(p, `#log li.earlier button`)
	p.wait(`Number(document.querySelector('#log li[data-seq]').dataset.seq) < ` + fmt.Sprint(firstBefore))
	// a turn at the end still works
	p.js(`document.getElementById('log').scrollTop = 1e9`)
	p.say("switch to ddr mode")
	p.wait(`document.getElementById('mode').dataset.value === 'ddr'`)
	p.shot("long-session")

	// the audit view: its first page, timed in the page
	p.js(`window.__t0 = performance.now(); document.getElementById('open-audit').click()`)
	p.wait(`document.querySelectorAll('#audit-list > li').length > 0`)
	first := eval[float64](p, `performance.now() - window.__t0`)
	p.wait(`document.getElementById('audit-status').textContent.startsWith('✓')`)
	verified := eval[float64](p, `performance.now() - window.__t0`)
	t.Logf("audit view of %d records: first page drawn %.0f ms after the click, chain verified %.0f ms after", n+1, first, verified)
	click(p, "#audit-older")
	p.wait(`document.querySelectorAll('#audit-list > li').length === 100`)
	click(p, "#panel-close")

	// the same store under a configuration that lost a trigger: the
	// replay shows what would have gone otherwise
	srv.kill()
	y, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	const trig = "      - \"(switch|change|go|move) [over] to [the] {item} mode\"\n"
	if !strings.Contains(string(y), trig) {
		t.Fatal("the demo configuration changed: no trigger to remove")
	}
	changed := filepath.Join(dir, "changed.yaml")
	if err := os.WriteFile(changed, []byte(strings.Replace(string(y), trig, "", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	srv.args = []string{"--config", changed, "--db", db}
	srv.start(t)
	p.wait(`document.body.dataset.connection === 'up'`)
	click(p, "#open-audit")
	p.wait(`document.querySelectorAll('#audit-list > li').length > 0`)
	// each record on its own configuration: the same; on the one running now: not
	click(p, "#audit-replay-run")
	p.wait(`/the configuration that decided it: it does everything the same way\.$/.test(document.querySelector('#audit-replay .audit-status').textContent)`)
	p.js(`window.__t0 = performance.now()`)
	click(p, "#audit-replay-current")
	p.wait(`/on the current configuration: [\d,]+ divergences?\.$/.test(document.querySelector('#audit-replay .audit-status').textContent)`)
	t.Logf("replay of %d records against a changed configuration: %.0f ms in the page; %s", n+1, eval[float64](p, `performance.now() - window.__t0`),
		p.str(`document.querySelector('#audit-replay .audit-status').textContent`))
	got := p.str(`document.querySelector('#audit-replay .divergence strong').textContent`)
	m := regexp.MustCompile(`^#(\d+) \(turn\): decision differs$`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("the first divergence reads %q", got)
	}
	// thousands of records back: brought into view, marked
	click(p, `#audit-replay .divergence button.show-record`)
	p.wait(`(li => li && li.classList.contains('diverged') && li.textContent.includes('Replay differs here: decision'))(document.querySelector('#audit-list > li[data-seq="` + m[1] + `"]'))`)
	p.shot("audit-replay")
	// read with the records around it, not with the thousands between: a
	// gap, read a page at a time, newest first, when asked
	gap := p.str(`document.querySelector('#audit-list > li.gap').textContent`)
	g := regexp.MustCompile(`^Records #(\d+)–#(\d+) are not shown`).FindStringSubmatch(gap)
	if g == nil {
		t.Fatalf("the gap says %q", gap)
	}
	high, _ := strconv.Atoi(g[2])
	click(p, `#audit-list > li.gap button.show-gap`)
	p.wait(`(li => li && li.previousElementSibling.dataset.seq === '` + strconv.Itoa(high-49) + `' && li.textContent.startsWith('Records #` + g[1] + `–#` + strconv.Itoa(high-50) + ` '))(document.querySelector('#audit-list > li.gap'))`)
	if n := eval[int](p, `document.querySelectorAll('#audit-list > li[data-seq]').length`); n > 300 {
		t.Errorf("%d records drawn to show one far back", n)
	}
	click(p, "#panel-close")

	// a record altered in the database: the view names it
	sq, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	if _, err := sq.Exec(`UPDATE audit SET record = replace(record, '(5000)', '(5001)') WHERE session = ? AND seq = 5000`, id); err != nil {
		t.Fatal(err)
	}
	click(p, "#open-audit")
	p.wait(`document.getElementById('audit-status').textContent.startsWith('✕ The chain does not verify: record #5000 is the first bad one')`)
	click(p, "#audit-replay-run")
	p.wait(`document.getElementById('audit-replay').textContent.startsWith('Not replayed: ')`)
	// the bad record, pages away, is brought into view and marked
	click(p, "#audit-show-bad")
	p.wait(`(li => li && li.classList.contains('bad-record') && li.textContent.includes('This record breaks the chain') && document.activeElement === li.querySelector('summary'))(document.querySelector('#audit-list > li[data-seq="5000"]'))`)
	p.shot("audit-broken")
}
