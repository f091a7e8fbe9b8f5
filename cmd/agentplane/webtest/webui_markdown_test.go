package webtest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentplane/agentplane/webui"
)

// markdownCases are the LLM's Markdown and the HTML markdown.js builds for
// it, hostile text included: whatever the text holds, it is drawn as
// text, and only the elements and attributes markdown.js makes exist.
var markdownCases = []struct {
	name, in, want string
}{
	{"Plain", "hello", "<p>hello</p>"},
	{"LinesOfAParagraph", "a\nb", "<p>a<br>b</p>"},
	{"CRLF", "a\r\nb\rc", "<p>a<br>b<br>c</p>"},
	{"Paragraphs", "a\n\n\nb", "<p>a</p><p>b</p>"},
	{"Empty", "", ""},
	{"Headings", "# One\n## Two ##\n###### Six", "<h3>One</h3><h4>Two</h4><h6>Six</h6>"},
	{"NotAHeading", "#hashtag", "<p>#hashtag</p>"},
	{"Emphasis", "**bold**, *em*, _em_ and __bold__", "<p><strong>bold</strong>, <em>em</em>, <em>em</em> and <strong>bold</strong></p>"},
	{"UnderscoresInWords", "snake_case_name", "<p>snake_case_name</p>"},
	{"NestedEmphasis", "***both***", "<p>*<strong>both</strong>*</p>"},   // not CommonMark's <em><strong>, but no text is lost
	{"EmphasisInsideStrong", "**a *b* c**", "<p>*<em>a </em>b* c**</p>"}, // nor here: shown, if not as CommonMark would
	{"UnclosedEmphasis", "**never closed", "<p>**never closed</p>"},
	{"CodeSpanWithHTML", "run `<b onclick=\"x()\">hi</b>` now", `<p>run <code>&lt;b onclick="x()"&gt;hi&lt;/b&gt;</code> now</p>`},
	{"CodeSpanKeepsMarkdown", "`**not bold** [x](https://e.com)`", "<p><code>**not bold** [x](https://e.com)</code></p>"},
	{"DoubleBacktickCode", "``a`b``", "<p><code>a`b</code></p>"},
	{"UnmatchedBackticks", "a ``b` c", "<p>a ``b` c</p>"},
	{"LongestCodeSpan", "`" + strings.Repeat("x", 2002) + "`", "<p><code>" + strings.Repeat("x", 2002) + "</code></p>"},
	{"LongerCodeSpan", "`" + strings.Repeat("x", 2003) + "`", "<p>`" + strings.Repeat("x", 2003) + "`</p>"}, // past the bound: text
	{"FencedCodeWithScript", "```html\n<script>window.__pwned = 1</script>\n  kept  \n```\nafter", "<pre><code>&lt;script&gt;window.__pwned = 1&lt;/script&gt;\n  kept  </code></pre><p>after</p>"},
	{"UnclosedFence", "~~~\n# not a heading", "<pre><code># not a heading</code></pre>"},
	{"ScriptTag", "<script>window.__pwned = 2</script>", "<p>&lt;script&gt;window.__pwned = 2&lt;/script&gt;</p>"},
	{"ImgOnerror", `<img src=x onerror="window.__pwned = 3">`, `<p>&lt;img src=x onerror="window.__pwned = 3"&gt;</p>`},
	{"IframeAndStyle", "<iframe src=https://evil.example></iframe><style>*{}</style>", "<p>&lt;iframe src=https://evil.example&gt;&lt;/iframe&gt;&lt;style&gt;*{}&lt;/style&gt;</p>"},
	{"Entities", "&amp; &lt;b&gt; &#60;", "<p>&amp;amp; &amp;lt;b&amp;gt; &amp;#60;</p>"},
	{"Link", "[the guide](https://example.com/a?b=1&c=2)", `<p><a href="https://example.com/a?b=1&amp;c=2" rel="noopener noreferrer" target="_blank">the guide</a></p>`},
	{"LinkTextWithBrackets", "[a [b] c](https://e.example)", "<p>[a [b] c](https://e.example)</p>"}, // no link: as written,
	{"LinkTargetWithParenthesis", "[x](https://e.example/a_(b))", `<p><a href="https://e.example/a_(b" rel="noopener noreferrer" target="_blank">x</a>)</p>`},
	{"Mailto", "[write](mailto:a@example.com)", `<p><a href="mailto:a@example.com" rel="noopener noreferrer" target="_blank">write</a></p>`},
	{"LinkWithoutText", "[](https://example.com)", `<p><a href="https://example.com" rel="noopener noreferrer" target="_blank">https://example.com</a></p>`},
	{"LinkTextWithHTML", "[<img src=x onerror=alert(1)>](https://example.com)", `<p><a href="https://example.com" rel="noopener noreferrer" target="_blank">&lt;img src=x onerror=alert(1)&gt;</a></p>`},
	{"LinkTargetWithQuotes", `[x](https://e.example/"onmouseover="alert(1))`, `<p><a href="https://e.example/&quot;onmouseover=&quot;alert(1" rel="noopener noreferrer" target="_blank">x</a>)</p>`},
	{"JavascriptLink", "[click](javascript:alert(1))", "<p>click (javascript:alert(1))</p>"},
	{"JavascriptLinkUpperCase", "[click](JAVASCRIPT:alert)", "<p>click (JAVASCRIPT:alert)</p>"},
	{"DataLink", "[x](data:text/html;base64,PHNjcmlwdD4=)", "<p>x (data:text/html;base64,PHNjcmlwdD4=)</p>"},
	{"VbscriptLinkWithoutText", "[](vbscript:msgbox)", "<p>vbscript:msgbox</p>"},
	{"ProtocolRelativeLink", "[x](//evil.example)", "<p>x (//evil.example)</p>"},
	{"Image", "![tracking pixel](https://evil.example/p.png)", "<p>tracking pixel</p>"},
	{"BareURL", "see https://example.com", "<p>see https://example.com</p>"},
	{"Lists", "- a\n* b\n+ c", "<ul><li>a</li><li>b</li><li>c</li></ul>"},
	{"OrderedFrom3", "3. x\n4) y", `<ol start="3"><li>x</li><li>y</li></ol>`},
	{"ListsOfTwoKinds", "- a\n1. b", "<ul><li>a</li></ul><ol><li>b</li></ol>"},
	{"ListThenParagraph", "- a\ntext", "<ul><li>a</li></ul><p>text</p>"},
	{"ListItemWithHTML", "- <script>window.__pwned = 4</script> **ok**", "<ul><li>&lt;script&gt;window.__pwned = 4&lt;/script&gt; <strong>ok</strong></li></ul>"},
	{"HeadingWithHTML", "# <i>x</i> *y*", "<h3>&lt;i&gt;x&lt;/i&gt; <em>y</em></h3>"},
}

// TestMarkdownRender runs markdown.js's render in headless Chromium over
// markdownCases: the HTML of each, and over them all, no element and no
// attribute but those markdown.js makes, no link but http(s) and mailto,
// and no script run. Long and pathological lines are drawn in bounded
// time.
func TestMarkdownRender(t *testing.T) {
	browser := newBrowser(t)
	h, err := webui.New()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /blank", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte("<!doctype html><title>markdown</title>"))
	})
	mux.Handle("/", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	p := newPage(t, browser)
	defer p.noScriptErrors()
	p.run(chromedp.Navigate(srv.URL + "/blank"))

	ins := make([]string, len(markdownCases))
	for i, c := range markdownCases {
		ins[i] = c.in
	}
	in, _ := json.Marshal(ins)
	type result struct {
		HTML     []string
		Elements []string // every element's tag, over all cases
		Attrs    []string // every attribute's name, over all cases
		Hrefs    []string
		Pwned    bool
	}
	res, err := chromedp.Run(p.ctx, chromedp.Evaluate[result](`(async () => {
		const { render } = await import('/ui/markdown.js');
		const out = { HTML: [], Elements: [], Attrs: [], Hrefs: [] };
		for (const text of `+string(in)+`) {
			const box = document.createElement('div');
			box.append(render(text));
			document.body.append(box); // in the document: an image would load, a script run
			out.HTML.push(box.innerHTML);
			for (const e of box.querySelectorAll('*')) {
				out.Elements.push(e.localName);
				for (const a of e.attributes) out.Attrs.push(a.name);
				if (e.localName === 'a') out.Hrefs.push(e.getAttribute('href'));
			}
		}
		await new Promise((r) => setTimeout(r, 50)); // an onerror would have run by now
		out.Pwned = window.__pwned !== undefined;
		return out;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range markdownCases {
		t.Run(c.name, func(t *testing.T) {
			if got := res.HTML[i]; got != c.want {
				t.Errorf("render(%.200q)\n got %.300s\nwant %.300s", c.in, got, c.want)
			}
		})
	}
	allowed := map[string]bool{"p": true, "br": true, "h3": true, "h4": true, "h5": true, "h6": true, "ul": true, "ol": true, "li": true,
		"pre": true, "code": true, "strong": true, "em": true, "a": true}
	for _, e := range res.Elements {
		if !allowed[e] {
			t.Errorf("an element markdown.js does not make: <%s>", e)
		}
	}
	for _, a := range res.Attrs {
		if a != "href" && a != "rel" && a != "target" && a != "start" {
			t.Errorf("an attribute markdown.js does not set: %s", a)
		}
	}
	for _, href := range res.Hrefs {
		if l := strings.ToLower(href); !strings.HasPrefix(l, "https://") && !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "mailto:") {
			t.Errorf("a link to %q", href)
		}
	}
	if res.Pwned {
		t.Error("a script in the Markdown ran")
	}

	// long lines, and lines built to make the inline pattern backtrack,
	// are drawn whole and in linear time: the bound is loose, for a loaded
	// machine (before the pattern's lengths were bounded, UnclosedLinks
	// took 29 s)
	type timed struct {
		Ms  float64
		Len int
	}
	for _, c := range []struct{ name, js string }{
		{"LongLine", `'word '.repeat(200000)`},
		{"LongLineOfMarks", `'*_[\x60'.repeat(25000)`},
		{"ManyBackticks", `'a' + '\x60'.repeat(20000) + 'x'`},
		{"BacktickRuns", `'a\x60\x60 b\x60 '.repeat(20000)`},
		{"UnclosedLinks", `'[a]('.repeat(50000)`},
		{"UnclosedLinkTexts", `'[a '.repeat(50000)`},
		{"UnclosedEmphasis", `'**a '.repeat(50000)`},
		{"ManyLines", `'- item\n'.repeat(20000)`},
	} {
		got, err := chromedp.Run(p.ctx, chromedp.Evaluate[timed](`(async () => {
			const { render } = await import('/ui/markdown.js');
			const text = `+c.js+`;
			const t0 = performance.now();
			const box = document.createElement('div');
			box.append(render(text));
			return { Ms: performance.now() - t0, Len: box.textContent.length };
		})()`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got.Ms > 5000 || got.Len == 0 {
			t.Errorf("%s: %d characters drawn in %.0f ms", c.name, got.Len, got.Ms)
		}
		t.Logf("%s: %d characters drawn in %.0f ms", c.name, got.Len, got.Ms)
	}
}
