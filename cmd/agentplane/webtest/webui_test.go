package webtest

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
	"github.com/agentplane/agentplane/internal/testkit/oidctest"
	"github.com/agentplane/agentplane/internal/testkit/servetest"
	"github.com/agentplane/agentplane/internal/testkit/testenv"
	"github.com/agentplane/agentplane/webui"
)

// The web page is tested in a real headless Chromium (Debian's chromium,
// which .ci/run installs), driven with chromedp, against the real binary's
// serve. Without Chromium the tests skip, unless AGENTPLANE_REQUIRE_BROWSER
// is set (CI sets it). Screenshots go to AGENTPLANE_SCREENSHOTS when set,
// else to the test's temporary directory. AGENTPLANE_HEADED runs a
// browser with a window (under xvfb-run where there is no display).

const evilName = `<img src=x onerror="window.__xss=1"> <script>window.__xss=2</script> Evil & Co`

// uiConfig writes the demo configuration with a catalog item whose name
// is HTML, the send tool as an HTTP tool to the outbox, and optionally
// API keys; it returns the file's path.
func uiConfig(t *testing.T, out *servetest.Outbox, keyDigest string) string {
	t.Helper()
	y := string(demo.YAML)
	anchor := "    items:\n      - id: TPL-123\n"
	if !strings.Contains(y, anchor) {
		t.Fatal("the demo configuration changed: no email template TPL-123 to add an item before")
	}
	evil, _ := json.Marshal(evilName)
	y = strings.Replace(y, anchor, "    items:\n      - {id: TPL-666, display_name: "+string(evil)+"}\n      - id: TPL-123\n", 1)
	core := "    tools: [agent_list_modes, agent_get_context, agent_set_mode]\n"
	if !strings.Contains(y, core) {
		t.Fatal("the demo configuration changed: no core toolbox to add the slow report to")
	}
	y = strings.Replace(y, core, "    tools: [agent_list_modes, agent_get_context, agent_set_mode, slow_report]\n", 1)
	y = servetest.SendOverHTTP(t, y, out.URL)
	y = strings.Replace(y, "    risk: medium\n    input_schema:", "    risk: high\n    requires_confirmation: true\n    input_schema:", 1)
	y += fmt.Sprintf("  - {name: slow_report, description: A report that takes a while., impact: read, http: {url: %q}}\n", out.URL+"/slow")
	if keyDigest != "" {
		y += "\nauth:\n  keys:\n    - {user_id: alice, key_sha256: " + keyDigest + "}\n"
	}
	p := filepath.Join(t.TempDir(), "agentplane.yaml")
	if err := os.WriteFile(p, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// server is a serve process at a fixed address, so that it can be
// stopped and started again where the page expects it.
type server struct {
	t    *testing.T
	bin  string
	addr string
	args []string
	env  []string
	cmd  *exec.Cmd
}

// start runs serve; t is the (sub)test that asks, the process lives until
// the whole test ends.
func (s *server) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(s.bin, append([]string{"serve", "--addr", s.addr}, s.args...)...)
	cmd.Env = append(os.Environ(), s.env...)
	stdout, _ := cmd.StdoutPipe()
	var stderr servetest.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.cmd = cmd
	s.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	if !sc.Scan() || !strings.Contains(sc.Text(), "serving http://"+s.addr) {
		cmd.Wait()
		t.Fatalf("serve printed %q\n%s", sc.Text(), stderr.String())
	}
	go io.Copy(io.Discard, stdout)
}

func (s *server) kill() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

func (s *server) url() string { return "http://" + s.addr }

// api calls the server's API (as the local user, or with a key).
func (s *server) api(t *testing.T, method, path, key string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = strings.NewReader(string(raw))
	}
	req, _ := http.NewRequest(method, s.url()+path, rd)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode
}

// startWorkflow starts a workflow in the session and returns its id.
func (s *server) startWorkflow(t *testing.T, session string, def map[string]any) string {
	t.Helper()
	def["session_id"] = session
	var started struct {
		WorkflowID string `json:"workflow_id"`
	}
	if st := s.api(t, "POST", "/v1/workflows", "", def, &started); st != 201 && st != 200 || started.WorkflowID == "" {
		t.Fatalf("start workflow %v: %d", def["name"], st)
	}
	return started.WorkflowID
}

// page is a browser tab with what went wrong in its scripts.
type page struct {
	t      *testing.T
	ctx    context.Context
	close  context.CancelFunc // closes the tab (a browser holds six connections to a server, and each tab's stream takes one)
	shots  string
	errors chan string
}

func newBrowser(t *testing.T) context.Context {
	t.Helper()
	exe := testenv.Browser()
	if exe == "" {
		if os.Getenv(testenv.RequireBrowserVar) != "" {
			t.Fatal("no chromium on PATH, and AGENTPLANE_REQUIRE_BROWSER is set")
		}
		t.Skip("no chromium on PATH: the web page's browser tests need Debian's chromium (apt-get install chromium)")
	}
	headless := chromedp.Headless
	if os.Getenv("AGENTPLANE_HEADED") != "" { // a visible window, e.g. under xvfb-run: the same tests in a headed browser
		headless = chromedp.Flag("headless", false)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 800),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	return actx
}

// newPage opens a tab: in a browser of its own when parent is the
// allocator's context, beside parent's tab when parent is a page's.
func newPage(t *testing.T, browser context.Context) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	p := &page{t: t, ctx: ctx, close: cancel, errors: make(chan string, 100)}
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok && e.ExceptionDetails != nil {
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			select {
			case p.errors <- msg:
			default:
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	p.shots = os.Getenv("AGENTPLANE_SCREENSHOTS")
	if p.shots == "" {
		p.shots = t.TempDir()
	}
	return p
}

// keyEvents dispatches key events one by one, as the protocol has them
// (a key is a keyDown, a char and a keyUp: kb.Encode).
func keyEvents(evs ...*input.DispatchKeyEventParams) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, e := range evs {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, *e); err != nil {
				return err
			}
		}
		return nil
	})
}

func (p *page) run(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// wait polls a JavaScript condition until it is true (an evaluation that
// fails while the page navigates is tried again).
func (p *page) wait(cond string) {
	p.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(p.ctx, 2*time.Second)
		var ok bool
		ok, err = chromedp.Run(ctx, chromedp.Evaluate[bool]("Boolean("+cond+")"))
		cancel()
		if err == nil && ok {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	state, _ := chromedp.Run(p.ctx, chromedp.Evaluate[string](`'[connection: ' + document.body.dataset.connection + ' ' + document.getElementById('conn').textContent +
		'; focus: ' + document.activeElement.id + ' ' + document.activeElement.tagName + '; open dialogs: ' + [...document.querySelectorAll('dialog[open]')].map(d => d.id) +
		'; panel: ' + document.getElementById('panel-body').textContent.slice(0, 300) + ']\n' + document.getElementById('log').innerText.slice(-1200)`))
	p.t.Fatalf("waiting for %s (last error: %v)\nthe conversation ends with:\n%s", cond, err, state)
}

// eval is the value of a JavaScript expression in the page.
func eval[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (p *page) str(expr string) string {
	p.t.Helper()
	return eval[string](p, expr)
}

// js runs JavaScript for its effect.
func (p *page) js(expr string) {
	p.t.Helper()
	eval[any](p, expr)
}

func (p *page) say(text string) {
	p.t.Helper()
	p.run(chromedp.Focus(chromedp.CSS("#composer-text")), chromedp.SendKeys(chromedp.CSS("#composer-text"), text+kb.Enter))
}

// press activates an element from the keyboard: focus, then Enter. An
// element redrawn between the lookup and the focus is looked up again.
func press[S chromedp.Selectable](p *page, sel S) {
	p.t.Helper()
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
		err := chromedp.Do(ctx, chromedp.Focus(sel), chromedp.KeyEvent(kb.Enter))
		cancel()
		if err == nil {
			return
		}
		if try == 3 || !strings.Contains(err.Error(), "Could not find node") {
			p.t.Fatalf("browser: press %v: %v", sel, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *page) shot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.shots, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// noScriptErrors fails the test on any uncaught exception in the page.
func (p *page) noScriptErrors() {
	p.t.Helper()
	for {
		select {
		case e := <-p.errors:
			p.t.Errorf("the page threw: %s", e)
		default:
			return
		}
	}
}

// closed is the condition that a dialog has closed and its close handler
// has put the focus back on the message box (it runs after the dialog
// closes: a key pressed before it would land elsewhere).
func closed(dialog string) string {
	return `!document.getElementById('` + dialog + `').open && document.activeElement.id === 'composer-text'`
}

// lastSys is the text of the newest system line of the conversation.
const lastSys = `([...document.querySelectorAll('#log .msg-sys')].map(e => e.firstChild ? e.firstChild.textContent : '').pop() || '')`

// TestWebPage drives the page through the ACP seed's flows A–D, the
// inbox, a workflow approval, hostile text, a server restart and a phone
// width — by typing and clicking, as a person would.
// hostileMarkdown is an LLM answer in Markdown with HTML, script, a
// javascript: link and a remote image in it.
const hostileMarkdown = "# Plan\n\nTwo points:\n\n- **cash flow** first\n- then *risk*\n\n1. draft\n2. send\n\n" +
	"```\n<script>window.pwned = 1</script>\n<b>bold?</b>\n```\n\n" +
	"Inline `<img src=x onerror=alert(1)>` and <iframe src=https://evil.example> and [the guide](https://example.com/guide), " +
	"[click](javascript:alert(1)), ![tracking pixel](https://evil.example/p.png).\n"

func TestWebPage(t *testing.T) {
	browser := newBrowser(t)
	llmSrv := llmtest.New(t, llmtest.Reply{Text: "Subject: Close the quarter with confidence. Dear CFO, here is how Q1 ends well.", Chunk: 6, Pause: 40 * time.Millisecond})
	dir := t.TempDir()
	out := servetest.NewOutbox(t, 0)
	srv := &server{t: t, bin: servetest.Binary(t), addr: servetest.FreeAddr(t),
		args: []string{"--config", uiConfig(t, out, ""), "--db", filepath.Join(dir, "ui.db"), "--workflow-lease", "1s"},
		env:  []string{"AGENTPLANE_LLM_BASE_URL=" + llmSrv.URL, "AGENTPLANE_LLM_MODEL=test-model"}}
	srv.start(t)
	p := newPage(t, browser)
	defer p.noScriptErrors()

	// first load: the chat is usable, measured from navigation start
	p.run(chromedp.Navigate(srv.url() + "/"))
	p.wait(`document.documentElement.dataset.ready !== undefined && !document.getElementById('composer-text').disabled`)
	coldReady := eval[float64](p, `Number(document.documentElement.dataset.ready)`) // a new browser: nothing cached
	session := p.str(`new URLSearchParams(location.hash.slice(1)).get('s')`)
	if session == "" {
		t.Fatal("the page opened no session")
	}
	p.wait(`document.querySelector('#log .msg-sys') !== null`) // "Session started", from the stream
	p.shot("start")

	t.Run("flow A: switch mode", func(t *testing.T) {
		p.t = t
		p.say("switch to DDR mode")
		p.wait(`document.getElementById('mode').dataset.value === 'ddr'`)
		p.wait(lastSys + `.startsWith('✓')`)
		if got := p.str(`[...document.querySelectorAll('#log .msg-user')].pop().textContent`); got != "switch to DDR mode" {
			t.Fatalf("the person's message shows as %q", got)
		}
		// the decision's trace is there on demand
		if n := p.str(`String(document.querySelector('#log li:last-child details.why ol').children.length)`); n == "0" {
			t.Fatal("no trace")
		}
		p.shot("flow-a")
		// and back through the mode switcher (by keyboard), which runs the same command
		p.run(chromedp.Focus(chromedp.CSS("#mode")), chromedp.KeyEvent(kb.ArrowDown))
		p.wait(`document.getElementById('mode-list').matches(':popover-open') && document.activeElement.id === 'mode-list'`)
		p.run(chromedp.KeyEvent(kb.ArrowUp), chromedp.KeyEvent(kb.Enter))
		p.wait(`document.getElementById('mode').dataset.value === 'general'`)
		p.wait(`[...document.querySelectorAll('#log .msg-user')].pop().textContent === 'Switch mode: General'`)
	})

	t.Run("flow B: launcher and picker", func(t *testing.T) {
		p.t = t
		p.say("I want to work on email templates")
		p.wait(`document.getElementById('picker').open && document.querySelectorAll('#picker-list [role=option]').length >= 4`)
		if q := p.str(`document.getElementById('picker-q').value`); q != "" {
			t.Fatalf("a launcher has no prefilter, the box holds %q", q)
		}
		// a name that is HTML is shown as text
		name := p.str(`[...document.querySelectorAll('#picker-list [role=option]')].find(o => o.dataset.id === 'TPL-666').firstChild.textContent`)
		if name != evilName {
			t.Fatalf("the HTML name shows as %q", name)
		}
		if n := p.str(`String(document.querySelectorAll('#picker-list img, #picker-list script').length)`); n != "0" {
			t.Fatalf("%s elements made from a name", n)
		}
		p.run(chromedp.SendKeys(chromedp.CSS("#picker-q"), kb.Escape))
		p.wait(closed("picker"))

		p.say("open the outreach template")
		p.wait(`document.getElementById('picker').open && document.querySelector('#picker-list [aria-selected=true]') !== null`)
		if q := p.str(`document.getElementById('picker-q').value`); q != "outreach" {
			t.Fatalf("prefilter %q", q)
		}
		active := p.str(`document.getElementById(document.getElementById('picker-q').getAttribute('aria-activedescendant')).dataset.id`)
		if active != "TPL-123" || p.str(`document.activeElement.id`) != "picker-q" {
			t.Fatalf("highlighted %q, focus on %q", active, p.str(`document.activeElement.id`))
		}
		p.shot("flow-b-picker")
		// type to filter: the catalog search, tolerant of a typo
		p.js(`document.getElementById('picker-q').value = ''`)
		p.run(chromedp.SendKeys(chromedp.CSS("#picker-q"), "renewel"))
		p.wait(`(l => l.length === 1 && l[0].dataset.id === 'TPL-200')(document.querySelectorAll('#picker-list [role=option]'))`)
		p.js(`document.getElementById('picker-q').value = ''`)
		p.run(chromedp.SendKeys(chromedp.CSS("#picker-q"), "outreach"))
		p.wait(`(l => l.length === 2 && l[0].dataset.id === 'TPL-123')(document.querySelectorAll('#picker-list [role=option]'))`)
		p.run(chromedp.SendKeys(chromedp.CSS("#picker-q"), kb.ArrowDown))
		p.wait(`document.querySelectorAll('#picker-list [role=option]')[1].getAttribute('aria-selected') === 'true'`)
		p.run(chromedp.SendKeys(chromedp.CSS("#picker-q"), kb.ArrowUp+kb.Enter))
		p.wait(closed("picker"))
		p.wait(`document.getElementById('awc').textContent.includes('Q1 CFO Outreach') && document.getElementById('awc').textContent.includes('CFO - MidMarket')`)
		p.wait(`[...document.querySelectorAll('#log .msg-user')].pop().textContent === 'Work on an email template: Q1 CFO Outreach'`)
		p.shot("flow-b-context")
	})

	t.Run("flow C: the LLM's streamed answer", func(t *testing.T) {
		p.t = t
		p.say("rewrite this template for the CFO persona")
		p.wait(`document.querySelector('#log .msg-llm.streaming') !== null`) // text arrives piece by piece
		p.wait(`(b => b && !b.classList.contains('streaming') && b.textContent === 'Subject: Close the quarter with confidence. Dear CFO, here is how Q1 ends well.')([...document.querySelectorAll('#log .msg-llm')].pop())`)
		if n := p.str(`String(document.querySelectorAll('#log .msg-llm').length)`); n != "1" {
			t.Fatalf("%s LLM bubbles for one answer", n)
		}
		reqs := llmSrv.Requests()
		if len(reqs) != 1 {
			t.Fatalf("%d LLM requests", len(reqs))
		}
		raw, _ := json.Marshal(reqs[0])
		if !strings.Contains(string(raw), "Q1 CFO Outreach") || !strings.Contains(string(raw), "CFO - MidMarket") {
			t.Fatal("the prompt lacks the work context")
		}
		p.shot("flow-c")
	})

	t.Run("the LLM's Markdown, hostile included", func(t *testing.T) {
		p.t = t
		llmSrv.Add(llmtest.Reply{Text: hostileMarkdown, Chunk: 40})
		p.say("what else could the email say?")
		last := `[...document.querySelectorAll('#log .msg-llm')].pop()`
		p.wait(`(b => b && !b.classList.contains('streaming') && b.querySelector('h3') !== null)(` + last + `)`)
		for js, want := range map[string]string{
			last + `.querySelector('h3').textContent`:                                       "Plan",
			`String(` + last + `.querySelectorAll('ul > li').length)`:                       "2",
			`String(` + last + `.querySelectorAll('ol > li').length)`:                       "2",
			last + `.querySelector('pre code').textContent`:                                 "<script>window.pwned = 1</script>\n<b>bold?</b>",
			last + `.querySelector('li strong').textContent`:                                "cash flow",
			last + `.querySelector('p code').textContent`:                                   "<img src=x onerror=alert(1)>",
			`String(` + last + `.querySelectorAll('a').length)`:                             "1",
			last + `.querySelector('a').getAttribute('href')`:                               "https://example.com/guide",
			last + `.querySelector('a').rel`:                                                "noopener noreferrer",
			`String(` + last + `.querySelectorAll('img, script, iframe, b, style').length)`: "0",
			`String(window.pwned === undefined)`:                                            "true",
		} {
			if got := p.str(js); got != want {
				t.Errorf("%s = %q, want %q", js, got, want)
			}
		}
		// the javascript: link and the remote image are text, not elements
		if txt := p.str(last + `.textContent`); !strings.Contains(txt, "javascript:alert(1)") || !strings.Contains(txt, "tracking pixel") ||
			!strings.Contains(txt, "<iframe src=https://evil.example>") {
			t.Errorf("what was not linked or fetched is not shown as text: %q", txt)
		}
		p.shot("llm-markdown")
	})

	t.Run("flow D: confirmation dialog", func(t *testing.T) {
		p.t = t
		p.run(chromedp.Focus(chromedp.CSS("#mode")), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter)) // general → DDR
		p.wait(`[...document.querySelectorAll('#log .msg-user')].pop().textContent === 'Switch mode: DDR'`)
		p.run(chromedp.Focus(chromedp.CSS("#mode")), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.ArrowDown), chromedp.KeyEvent(kb.Enter)) // DDR → Sales
		p.wait(`[...document.querySelectorAll('#log .msg-user')].pop().textContent === 'Switch mode: Sales' && ` + lastSys + ` === '✓ Mode: Sales.'`)
		p.say("send this to the Q1 pilot list")
		p.wait(`document.getElementById('confirm').open`)
		if q := p.str(`document.getElementById('confirm-text').textContent`); q != "Confirm send to 'Q1 pilot list'?" {
			t.Fatalf("question %q", q)
		}
		if f := p.str(`document.activeElement.id`); f != "confirm-no" {
			t.Fatalf("focus on %q: the safe answer should be the default", f)
		}
		// the token stays between the page and the server: not in the DOM
		if p.str(`String(document.body.innerHTML.includes('confirmation_token'))`) != "false" {
			t.Fatal("the token is in the page's markup")
		}
		p.shot("flow-d-confirm")
		p.run(chromedp.KeyEvent(kb.Tab))
		p.wait(`document.activeElement.id === 'confirm-yes'`)
		p.run(chromedp.KeyEvent(kb.Enter))
		p.wait(`!document.getElementById('confirm').open`)
		p.wait(lastSys + `.startsWith('✓') && ` + lastSys + `.includes('Q1 pilot list — done')`)
		p.wait(`[...document.querySelectorAll('.confirm-choice')].every(b => b.disabled)`)
		// the send ran once, confirmed by the human's token
		var audit []map[string]any
		for _, r := range auditRecords(t, srv, session) {
			if r["kind"] == "execution" {
				audit = append(audit, r)
			}
		}
		if len(audit) != 1 || !strings.Contains(fmt.Sprint(audit[0]["intent"]), "send_template_to_list") || !strings.Contains(fmt.Sprint(audit[0]["result"]), "success") {
			t.Fatalf("executions: %v", audit)
		}
		if out.Count() != 1 {
			t.Fatalf("%d sends reached the outbox", out.Count())
		}
		// declined: nothing is done. The Enter that sends the turn is let go
		// only once the answer has opened the dialog: its keypress and its
		// release reach the dialog's focused Cancel, and must not answer it
		// (chromedp sends a key as keyDown, char and keyUp, three events)
		enter := kb.Encode('\r')
		if len(enter) != 3 {
			t.Fatalf("Enter encodes as %d events, want keyDown, char, keyUp", len(enter))
		}
		p.run(chromedp.Focus(chromedp.CSS("#composer-text")), chromedp.SendKeys(chromedp.CSS("#composer-text"), "send this to the Q1 pilot list"), keyEvents(enter[0]))
		p.wait(`document.getElementById('confirm').open && document.activeElement.id === 'confirm-no'`)
		p.run(keyEvents(enter[1:]...))
		if !eval[bool](p, `document.getElementById('confirm').open`) {
			t.Fatal("the Enter that sent the turn answered the dialog its answer opened")
		}
		press(p, chromedp.CSS("#confirm-no"))
		p.wait(lastSys + ` === 'Cancelled; nothing was done.'`)
		if out.Count() != 1 {
			t.Fatalf("declined, and %d sends reached the outbox", out.Count())
		}
		// the LLM proposes the send: the same dialog, its token for exactly that call
		llmSrv.Add(llmtest.Reply{Text: "I'll send it once you confirm.", ToolCalls: []llmtest.Call{{Name: "send_template", Arguments: `{"list_id":"LIST-9"}`}}})
		p.say("get this out to the people in the pilot program")
		p.wait(`document.getElementById('confirm').open`)
		if q := p.str(`document.getElementById('confirm-text').textContent`); q != `Confirm send_template with {"list_id":"LIST-9"}?` {
			t.Fatalf("the proposal's question %q", q)
		}
		p.run(chromedp.KeyEvent(kb.Tab), chromedp.KeyEvent(kb.Enter))
		p.wait(`!document.getElementById('confirm').open && ` + lastSys + `.startsWith('✓')`)
		if out.Count() != 2 {
			t.Fatalf("the confirmed proposal: %d sends reached the outbox", out.Count())
		}
		p.shot("flow-d-done")
	})

	t.Run("hostile and long text", func(t *testing.T) {
		p.t = t
		hostile := `<script>window.__xss=3</script><img src=x onerror="window.__xss=4"> مرحبا 你好 👋`
		p.js(`document.getElementById('composer-text').value = ` + jsString(hostile))
		p.run(chromedp.Focus(chromedp.CSS("#composer-text")), chromedp.KeyEvent(kb.Enter))
		p.wait(`[...document.querySelectorAll('#log .msg-user')].pop().textContent === ` + jsString(hostile))
		if n := p.str(`String(document.querySelectorAll('#log img, #log script').length)`); n != "0" {
			t.Fatalf("%s elements made from a message", n)
		}
		// over the server's limit: its message, and the text is kept
		long := strings.Repeat("é", 3000) // 6000 bytes
		p.js(`document.getElementById('composer-text').value = ` + jsString(long))
		p.run(chromedp.Focus(chromedp.CSS("#composer-text")), chromedp.KeyEvent(kb.Enter))
		p.wait(lastSys + `.startsWith('Not sent: ')`)
		if msg := p.str(lastSys); !strings.Contains(msg, "4096") {
			t.Fatalf("the limit's message: %q", msg)
		}
		if got := p.str(`document.getElementById('composer-text').value`); got != long {
			t.Fatalf("the text was not kept (%d runes)", len([]rune(got)))
		}
		p.js(`(b => { b.value = ''; b.dispatchEvent(new Event('input')); })(document.getElementById('composer-text'))`)
		xss := eval[any](p, `window.__xss`)
		if xss != nil {
			t.Fatalf("a script ran: window.__xss = %v", xss)
		}
	})

	t.Run("inbox and floor notices", func(t *testing.T) {
		p.t = t
		var created struct{ ID string }
		if st := srv.api(t, "POST", "/v1/notifications", "", map[string]any{"address": "USER", "target": "USER", "handler": "SYSTEM",
			"title": `<img src=x onerror="window.__xss=5">Invoice ready`, "body": "Q1 invoice for ACME", "urgency": "HIGH"}, &created); st != 201 {
			t.Fatalf("post notification: %d", st)
		}
		p.wait(`!document.getElementById('inbox-badge').hidden && document.getElementById('inbox-badge').textContent === '1'`)
		if l := p.str(`document.getElementById('open-inbox').getAttribute('aria-label')`); l != "Inbox, 1 unread" {
			t.Fatalf("bell label %q", l)
		}
		p.shot("inbox-badge")
		p.run(chromedp.Focus(chromedp.CSS("#open-inbox")), chromedp.KeyEvent(kb.Enter))
		p.wait(`document.getElementById('panel').open && document.getElementById('panel-body').textContent.includes('Invoice ready')`)
		p.wait(`document.getElementById('inbox-badge').hidden`)
		var n struct{ State string }
		srv.api(t, "GET", "/v1/notifications/"+created.ID, "", nil, &n)
		if n.State != "DELIVERED" {
			t.Fatalf("after opening the inbox the notification is %s", n.State)
		}
		p.shot("inbox")
		p.run(chromedp.KeyEvent(kb.Escape))
		p.wait(closed("panel"))
		// channel B: a pill in the conversation
		if st := srv.api(t, "POST", "/v1/notifications", "", map[string]any{"address": "SESSION", "session_id": session, "target": "USER", "handler": "SYSTEM",
			"title": "Build finished", "body": "all green"}, nil); st != 201 {
			t.Fatalf("post floor notification: %d", st)
		}
		p.wait(`(e => e && e.textContent === 'Build finished — all green')([...document.querySelectorAll('#log .pill')].pop())`)
	})

	t.Run("workflow approval", func(t *testing.T) {
		p.t = t
		approved := srv.startWorkflow(t, session, map[string]any{"name": "Send to the pilot list", "wait": true, "tasks": []any{
			map[string]any{"id": "find", "tool": "catalog_search", "args": map[string]any{"catalog_id": "mailer_lists", "query": "q1 pilot"}},
			map[string]any{"id": "send", "tool": "send_template", "args": map[string]any{"list_id": "${find.output.items.0.id}"}, "depends_on": []string{"find"}},
		}})
		press(p, chromedp.CSS("#open-workflows"))
		p.wait(`document.getElementById('panel').open && document.getElementById('panel-body').textContent.includes('awaiting approval')`)
		press(p, chromedp.CSS(`#panel-body ul.items button`))
		p.wait(`document.getElementById('panel-body').textContent.includes('Approval needed for layer 2')`)
		if !strings.Contains(p.str(`document.getElementById('panel-body').textContent`), `"list_id":"LIST-9"`) {
			t.Fatal("the approval does not show the resolved arguments")
		}
		p.shot("workflow-approval")
		p.run(chromedp.SendKeys(chromedp.CSS("#wf-feedback"), "looks right"))
		press(p, `//button[text()="Approve"]`)
		p.wait(`document.querySelector('#panel-body [data-status]') && document.querySelector('#panel-body [data-status]').dataset.status === 'completed'`)
		var wf struct {
			Status string
			Tasks  []struct{ ID, Status, Approval string }
		}
		srv.api(t, "GET", "/v1/workflows/"+approved, "", nil, &wf)
		if wf.Status != "completed" || wf.Tasks[1].Status != "completed" || wf.Tasks[1].Approval == "" {
			t.Fatalf("workflow after approval: %+v", wf)
		}
		if out.Count() != 3 {
			t.Fatalf("after the approved workflow, %d sends reached the outbox", out.Count())
		}
		p.shot("workflow-done")
		// another, rejected with feedback: aborted, nothing sent
		second := srv.startWorkflow(t, session, map[string]any{"name": "Send again", "wait": true, "tasks": []any{
			map[string]any{"id": "send", "tool": "send_template", "args": map[string]any{"list_id": "LIST-9"}},
		}})
		press(p, `//button[text()="All workflows"]`)
		p.wait(`document.getElementById('panel-body').textContent.includes('Send again')`)
		press(p, `//li[contains(., 'Send again')]/button`)
		p.wait(`document.getElementById('panel-body').textContent.includes('Approval needed for layer 1')`)
		p.run(chromedp.SendKeys(chromedp.CSS("#wf-feedback"), "not twice"))
		press(p, `//button[text()="Reject"]`)
		p.wait(`(e => e && e.dataset.status === 'aborted')(document.querySelector('#panel-body [data-status]'))`)
		var rejected struct{ Status, Reason string }
		srv.api(t, "GET", "/v1/workflows/"+second, "", nil, &rejected)
		if rejected.Status != "aborted" || !strings.Contains(rejected.Reason, "not twice") || out.Count() != 3 {
			t.Fatalf("rejected: %+v, %d sends", rejected, out.Count())
		}
		p.run(chromedp.KeyEvent(kb.Escape))
		p.wait(closed("panel"))
	})

	t.Run("server restart: the page resumes with no duplicate", func(t *testing.T) {
		p.t = t
		// a workflow whose task is running when serve dies
		running := srv.startWorkflow(t, session, map[string]any{"name": "Slow report", "tasks": []any{map[string]any{"id": "report", "tool": "slow_report"}}})
		time.Sleep(400 * time.Millisecond)
		before := p.str(`JSON.stringify([...document.querySelectorAll('#log li')].map(e => e.dataset.seq + ' ' + e.className + ' ' + e.textContent))`)
		srv.kill()
		p.wait(`document.body.dataset.connection === 'down' && document.getElementById('conn').textContent.startsWith('Connection lost')`)
		p.shot("connection-lost")
		// a message typed while the server is down is sent when it is back
		p.say("switch to DDR mode")
		time.Sleep(300 * time.Millisecond)
		srv.start(t)
		p.wait(`document.body.dataset.connection === 'up' && document.getElementById('mode').dataset.value === 'ddr'`)
		p.wait(lastSys + `.startsWith('✓')`)
		after := p.str(`JSON.stringify([...document.querySelectorAll('#log li')].map(e => e.dataset.seq + ' ' + e.className + ' ' + e.textContent))`)
		var b, a []string
		json.Unmarshal([]byte(before), &b)
		json.Unmarshal([]byte(after), &a)
		if len(a) <= len(b) || !slices.Equal(a[:len(b)], b) {
			t.Fatalf("the conversation changed across the restart:\nbefore %q\nafter  %q", b, a)
		}
		// every turn of the store is on the page once
		var turns []string
		for _, r := range auditRecords(t, srv, session) {
			if r["kind"] == "turn" {
				turns = append(turns, fmt.Sprint(r["seq"]))
			}
		}
		shown := eval[[]string](p, `[...document.querySelectorAll('#log .msg-user')].map(e => e.dataset.seq)`)
		if !slices.Equal(shown, turns) {
			t.Fatalf("turns on the page %v, in the store %v", shown, turns)
		}
		p.shot("resumed")
		// the workflow was taken over, interrupted: continued from the page
		press(p, "#open-workflows")
		p.wait(`document.getElementById('panel').open && document.getElementById('panel-body').textContent.includes('Slow report')`)
		press(p, `//li[contains(., 'Slow report')]/button`)
		p.wait(`document.getElementById('panel-body').textContent.includes('Interrupted')`)
		p.shot("workflow-interrupted")
		press(p, `//button[text()="Continue"]`)
		p.wait(`(e => e && e.dataset.status === 'completed')(document.querySelector('#panel-body [data-status]'))`)
		var wf struct{ Status string }
		srv.api(t, "GET", "/v1/workflows/"+running, "", nil, &wf)
		if wf.Status != "completed" {
			t.Fatalf("the interrupted workflow, continued: %s", wf.Status)
		}
		p.run(chromedp.KeyEvent(kb.Escape))
		p.wait(closed("panel"))
	})

	t.Run("phone width", func(t *testing.T) {
		p.t = t
		p.run(chromedp.EmulateViewport(375, 740))
		p.wait(`document.documentElement.scrollWidth <= 375`)
		p.shot("phone")
		p.say("I want to browse the ddrs")
		p.wait(`document.getElementById('picker').open`)
		p.wait(`document.getElementById('picker').getBoundingClientRect().right <= 375`)
		p.shot("phone-picker")
		p.run(chromedp.SendKeys(chromedp.CSS("#picker-q"), kb.Escape))
		p.wait(closed("picker"))
		p.run(chromedp.EmulateViewport(1200, 800))
	})

	t.Run("sessions: list and resume", func(t *testing.T) {
		p.t = t
		press(p, chromedp.CSS("#open-sessions"))
		p.wait(`document.getElementById('panel').open && document.querySelector('#panel-body button.primary') !== null`)
		press(p, chromedp.CSS(`#panel-body button.primary`)) // new session
		p.wait(`new URLSearchParams(location.hash.slice(1)).get('s') !== ` + jsString(session))
		p.wait(`document.querySelectorAll('#log .msg-user').length === 0 && document.getElementById('awc').textContent.includes('Nothing is open')`)
		press(p, chromedp.CSS("#open-sessions"))
		p.wait(`document.querySelectorAll('#panel-body ul.items li').length === 2`)
		press(p, `//li[contains(., 'Q1 CFO Outreach')]/button`)
		p.wait(`new URLSearchParams(location.hash.slice(1)).get('s') === ` + jsString(session))
		p.wait(`document.getElementById('awc').textContent.includes('Q1 CFO Outreach') && document.querySelectorAll('#log .msg-llm').length === 3`)
	})

	t.Run("workflow decisions", func(t *testing.T) {
		p.t = t
		decided := srv.startWorkflow(t, session, map[string]any{"name": "Read two records", "wait": true, "per_layer_validation": true, "tasks": []any{
			map[string]any{"id": "one", "tool": "catalog_search", "args": map[string]any{"catalog_id": "ddrs", "query": "acp"}},
			map[string]any{"id": "two", "tool": "catalog_search", "args": map[string]any{"catalog_id": "ddrs", "query": "workflow"}, "depends_on": []string{"one"}},
		}})
		p.run(chromedp.Focus(chromedp.CSS("#open-workflows")), chromedp.KeyEvent(kb.Enter))
		p.wait(`document.getElementById('panel').open && document.getElementById('panel-body').textContent.includes('Read two records')`)
		press(p, `//li[contains(., 'awaiting decision')]/button`)
		p.wait(`document.getElementById('panel-body').textContent.includes('Layer 1 is done: go on?')`)
		p.shot("workflow-decision")
		press(p, `//button[text()="Continue"]`)
		p.wait(`document.getElementById('panel-body').textContent.includes('Layer 2 is done: go on?')`)
		// replan: the requirement picks a tool, added as a layer after the one that ran
		p.run(chromedp.SendKeys(chromedp.CSS("#wf-requirement"), "return the session's current mode and active work context"))
		press(p, `//button[text()="Replan"]`)
		p.wait(`document.getElementById('panel-body').textContent.includes('Layer 3 is done: go on?') && document.getElementById('panel-body').textContent.includes('agent_get_context')`)
		p.run(chromedp.SendKeys(chromedp.CSS("#wf-feedback"), "seen enough"))
		press(p, `//button[text()="Abort"]`)
		p.wait(`(e => e && e.dataset.status === 'aborted')(document.querySelector('#panel-body [data-status]'))`)
		var wf struct {
			Status, Reason string
			Tasks          []struct{ Tool, Status, Added string }
		}
		srv.api(t, "GET", "/v1/workflows/"+decided, "", nil, &wf)
		if wf.Status != "aborted" || wf.Reason != "seen enough" || len(wf.Tasks) != 3 || wf.Tasks[2].Tool != "agent_get_context" || wf.Tasks[2].Added == "" {
			t.Fatalf("after Replan, Continue and Abort: %+v", wf)
		}
		p.run(chromedp.KeyEvent(kb.Escape))
		p.wait(closed("panel"))
	})

	t.Run("a question's option buttons, clearing the work context", func(t *testing.T) {
		p.t = t
		// a session begun where there is no UI (a terminal): its question lists options
		var created struct {
			SessionID string `json:"session_id"`
		}
		srv.api(t, "POST", "/v1/sessions", "", map[string]any{}, &created)
		var answer struct{ Decision struct{ Action string } }
		srv.api(t, "POST", "/v1/sessions/"+created.SessionID+"/turns", "", map[string]any{"text": "open the outreach template", "ui": false}, &answer)
		if answer.Decision.Action != "ask_clarifying_question" {
			t.Fatalf("without a UI: %s", answer.Decision.Action)
		}
		// resumed in the page from the sessions list
		press(p, chromedp.CSS("#open-sessions"))
		p.wait(`document.getElementById('panel').open && document.querySelectorAll('#panel-body ul.items li').length === 3`)
		press(p, chromedp.CSS(`#panel-body ul.items li:first-child button`))
		p.wait(`new URLSearchParams(location.hash.slice(1)).get('s') === ` + jsString(created.SessionID))
		p.wait(`[...document.querySelectorAll('#log .choices button')].some(b => b.textContent === 'Q1 CTO Outreach')`)
		p.shot("option-buttons")
		press(p, `//button[text()="Q1 CTO Outreach"]`)
		p.wait(`document.getElementById('awc').textContent.includes('Q1 CTO Outreach') && !document.getElementById('awc-clear').hidden`)
		p.run(chromedp.Focus(chromedp.CSS("#awc-clear")), chromedp.KeyEvent(kb.Enter))
		p.wait(`document.getElementById('awc').textContent.includes('Nothing is open') && document.getElementById('awc-clear').hidden`)
		var snap struct {
			AWC map[string]any `json:"awc"`
		}
		srv.api(t, "GET", "/v1/sessions/"+created.SessionID, "", nil, &snap)
		if len(snap.AWC) != 0 {
			t.Fatalf("cleared on the page, the session holds %v", snap.AWC)
		}
	})

	t.Run("time to a usable chat", func(t *testing.T) {
		p.t = t
		var times []float64
		for range 5 { // each in a new tab of the same browser (its cache revalidates the files)
			q := newPage(t, p.ctx)
			q.run(chromedp.Navigate(srv.url() + "/#s=" + session))
			q.wait(`document.documentElement.dataset.ready !== undefined`)
			times = append(times, eval[float64](q, `Number(document.documentElement.dataset.ready)`))
			q.noScriptErrors()
		}
		type resource struct {
			Name                     string
			Transfer, Encoded, Bytes float64
		}
		res := eval[[]resource](p, `[performance.getEntriesByType('navigation')[0], ...performance.getEntriesByType('resource')].filter(e => !e.name.includes('/v1/')).map(e => ({Name: e.name, Transfer: e.transferSize, Encoded: e.encodedBodySize, Bytes: e.decodedBodySize}))`)
		var raw, zipped float64
		for _, r := range res {
			raw += r.Bytes
			zipped += r.Encoded
		}
		slices.Sort(times)
		t.Logf("web page: %d files, %.0f bytes (%.1f KiB), %.0f bytes gzip (%.1f KiB) on the wire; time to a usable chat: first load in a new browser %.0f ms (a new session created), then 5 loads in new tabs: min %.0f ms, median %.0f ms, max %.0f ms",
			len(res), raw, raw/1024, zipped, zipped/1024, coldReady, times[0], times[2], times[4])
		h, err := webui.New()
		if err != nil {
			t.Fatal(err)
		}
		if len(res) != len(h.Assets()) || raw > 100*1024 { // the page, its style and its modules, each once, within 100 KiB
			t.Fatalf("assets: %d loaded, %d served, %.0f bytes (at most %d): %+v", len(res), len(h.Assets()), raw, 100*1024, res)
		}
	})
}

// TestWebPageSignIn: a server with API keys gets the key from the person;
// a wrong key is refused with the server's message.
func TestWebPageSignIn(t *testing.T) {
	browser := newBrowser(t)
	key := "ui-test-key-0123456789abcdef"
	sum := sha256.Sum256([]byte(key))
	srv := &server{t: t, bin: servetest.Binary(t), addr: servetest.FreeAddr(t),
		args: []string{"--config", uiConfig(t, servetest.NewOutbox(t, 0), hex.EncodeToString(sum[:])), "--db", filepath.Join(t.TempDir(), "ui.db")}}
	srv.start(t)
	p := newPage(t, browser)
	defer p.noScriptErrors()
	p.run(chromedp.Navigate(srv.url() + "/"))
	p.wait(`document.getElementById('signin').open && document.activeElement.id === 'signin-key'`)
	p.shot("sign-in")
	p.run(chromedp.SendKeys(chromedp.CSS("#signin-key"), "wrong-key"+kb.Enter))
	p.wait(`document.getElementById('signin').open && document.getElementById('signin-error').textContent !== ''`)
	p.run(chromedp.SendKeys(chromedp.CSS("#signin-key"), key+kb.Enter))
	p.wait(`!document.getElementById('signin').open && !document.getElementById('composer-text').disabled`)
	p.say("switch to DDR mode")
	p.wait(`document.getElementById('mode').dataset.value === 'ddr'`)
	var list struct {
		Sessions []struct{ SessionID string } `json:"sessions"`
	}
	srv.api(t, "GET", "/v1/sessions", key, nil, &list)
	if len(list.Sessions) != 1 {
		t.Fatalf("alice has %d sessions", len(list.Sessions))
	}
}

// TestWebPageSignInWithProvider: a server that takes the organisation's
// tokens signs the person in through the provider — authorization code
// with PKCE, no secret in the page — and the page then acts as them.
func TestWebPageSignInWithProvider(t *testing.T) {
	browser := newBrowser(t)
	idp := oidctest.New(t)
	idp.User = "carol"
	cfg := uiConfig(t, servetest.NewOutbox(t, 0), "")
	y, _ := os.ReadFile(cfg)
	y = append(y, fmt.Sprintf("\nauth:\n  oidc: {issuer: %q, audience: https://agentplane.test/mcp, client_id: agentplane-page, scopes: [openid, agentplane]}\n", idp.URL)...)
	os.WriteFile(cfg, y, 0o644)
	srv := &server{t: t, bin: servetest.Binary(t), addr: servetest.FreeAddr(t), args: []string{"--config", cfg, "--db", filepath.Join(t.TempDir(), "ui.db")}}
	srv.start(t)
	p := newPage(t, browser)
	defer p.noScriptErrors()
	p.run(chromedp.Navigate(srv.url() + "/"))
	p.wait(`document.getElementById('signin').open && !document.getElementById('signin-oidc').hidden && document.getElementById('signin-keys').hidden`)
	if got := p.str(`document.getElementById('signin-provider').textContent`); !strings.HasPrefix(got, "Sign in with 127.0.0.1:") {
		t.Fatalf("the provider's button reads %q", got)
	}
	p.shot("sign-in-provider")
	click(p, "#signin-provider") // to the provider, which approves carol at once, and back
	p.wait(`!document.getElementById('signin').open && !document.getElementById('composer-text').disabled && location.search === ''`)
	p.say("switch to DDR mode")
	p.wait(`document.getElementById('mode').dataset.value === 'ddr'`)
	// the session is carol's: her token lists it
	tok := idp.Token(map[string]any{"sub": "carol", "aud": "https://agentplane.test/mcp"})
	var list struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
		} `json:"sessions"`
	}
	srv.api(t, "GET", "/v1/sessions", tok, nil, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].SessionID != p.str(`new URLSearchParams(location.hash.slice(1)).get('s')`) {
		t.Fatalf("carol's sessions: %+v", list.Sessions)
	}
	// nothing in the page's storage but the token: no secret, no code
	if got := p.str(`JSON.stringify(Object.keys(sessionStorage))`); got != `["agentplane.key"]` {
		t.Fatalf("the tab keeps %s", got)
	}
	// a state that this tab did not send is refused
	p.run(chromedp.Navigate(srv.url() + "/?code=stolen&state=forged"))
	p.wait(`document.getElementById('signin').open && document.getElementById('signin-error').textContent.includes('state differs')`)
}

func auditRecords(t *testing.T, srv *server, session string) []map[string]any {
	t.Helper()
	resp, err := http.Get(srv.url() + "/v1/sessions/" + session + "/audit")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []map[string]any
	dec := json.NewDecoder(resp.Body)
	for {
		var r map[string]any
		if err := dec.Decode(&r); err != nil {
			break
		}
		out = append(out, r)
	}
	return out
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
