package webui_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/webui"
)

func get(t *testing.T, h http.Handler, method, path string, header ...string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

func TestHandler(t *testing.T) {
	h, err := webui.New()
	if err != nil {
		t.Fatal(err)
	}
	// the page, with a policy that lets only its own files run
	r := get(t, h, "GET", "/")
	body, _ := io.ReadAll(r.Body)
	if r.StatusCode != 200 || r.Header.Get("Content-Type") != "text/html; charset=utf-8" || !bytes.Contains(body, []byte(`<script type="module" src="/ui/app.js">`)) {
		t.Fatalf("%d %v %.100s", r.StatusCode, r.Header, body)
	}
	if csp := r.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
		t.Fatalf("CSP %q", csp)
	}
	// gzipped when asked, the same bytes
	z := get(t, h, "GET", "/ui/app.js", "Accept-Encoding", "br, gzip;q=0.8")
	zr, err := gzip.NewReader(z.Body)
	if err != nil || z.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip: %v %v", err, z.Header)
	}
	unzipped, _ := io.ReadAll(zr)
	plain, _ := io.ReadAll(get(t, h, "GET", "/ui/app.js").Body)
	if !bytes.Equal(unzipped, plain) || len(plain) == 0 || !strings.HasPrefix(z.Header.Get("Content-Type"), "text/javascript") {
		t.Fatalf("gzip and plain differ (%d, %d bytes), type %q", len(unzipped), len(plain), z.Header.Get("Content-Type"))
	}
	if get(t, h, "GET", "/ui/app.js", "Accept-Encoding", "gzip;q=0").Header.Get("Content-Encoding") != "" {
		t.Fatal("gzip;q=0 refuses gzip")
	}
	// revalidation by entity tag
	etag := z.Header.Get("ETag")
	if r := get(t, h, "GET", "/ui/app.js", "If-None-Match", etag); r.StatusCode != http.StatusNotModified || etag == "" {
		t.Fatalf("If-None-Match %s: %d", etag, r.StatusCode)
	}
	// HEAD has no body; unknown paths are 404
	if r := get(t, h, "HEAD", "/ui/style.css"); r.StatusCode != 200 || r.ContentLength <= 0 {
		t.Fatalf("HEAD: %d %d", r.StatusCode, r.ContentLength)
	}
	for _, p := range []string{"/ui/", "/ui/../webui.go", "/ui/nope.js", "/index.html"} {
		if r := get(t, h, "GET", p); r.StatusCode != 404 {
			t.Fatalf("%s: %d", p, r.StatusCode)
		}
	}
	// small: the figure the README gives
	var raw, zipped int
	for _, a := range h.Assets() {
		raw += len(a.Raw)
		zipped += len(a.Gzip)
	}
	if raw > 100<<10 {
		t.Fatalf("the page's files are %d bytes; the budget is 100 KiB", raw)
	}
	t.Logf("%d files, %d bytes, %d gzipped", len(h.Assets()), raw, zipped)
}

// TestModules: every module the page's script imports, app.js on, is
// served as JavaScript and preloaded by the page (so the browser fetches
// them at once, not one import after another), and nothing else is.
func TestModules(t *testing.T) {
	h, err := webui.New()
	if err != nil {
		t.Fatal(err)
	}
	imports := regexp.MustCompile(`(?m)^import (?:[^'"]* from )?'\./([\w-]+\.js)';$`)
	seen := map[string]bool{}
	queue := []string{"app.js"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		r := get(t, h, "GET", "/ui/"+name)
		body, _ := io.ReadAll(r.Body)
		if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/javascript") {
			t.Fatalf("%s: %d %q", name, r.StatusCode, r.Header.Get("Content-Type"))
		}
		for _, m := range imports.FindAllStringSubmatch(string(body), -1) {
			if !seen[m[1]] {
				seen[m[1]] = true
				queue = append(queue, m[1])
			}
		}
	}
	page, _ := io.ReadAll(get(t, h, "GET", "/").Body)
	preloads := map[string]bool{}
	for _, m := range regexp.MustCompile(`<link rel="modulepreload" href="/ui/([\w-]+\.js)">`).FindAllSubmatch(page, -1) {
		preloads[string(m[1])] = true
	}
	delete(seen, "app.js")
	for name := range seen {
		if !preloads[name] {
			t.Errorf("%s is imported but not preloaded by index.html", name)
		}
	}
	for name := range preloads {
		if !seen[name] {
			t.Errorf("index.html preloads %s, which nothing imports", name)
		}
	}
	if len(seen) < 10 {
		t.Fatalf("app.js imports %d modules: %v", len(seen), seen)
	}
}
