package sameorigin_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentplane/agentplane/internal/sameorigin"
)

func TestRedirects(t *testing.T) {
	t.Parallel()
	leaked := make(chan string, 1)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		leaked <- r.Header.Get("X-Key") + " " + string(b)
	}))
	defer other.Close()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		case "/here":
			http.Redirect(w, r, "/ok", http.StatusTemporaryRedirect)
		case "/ok":
			b, _ := io.ReadAll(r.Body)
			io.WriteString(w, r.Header.Get("X-Key")+" "+string(b))
		}
	}))
	defer origin.Close()
	c := sameorigin.Client(nil)
	post := func(path string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, origin.URL+path, strings.NewReader("args"))
		req.Header.Set("X-Key", "secret")
		return c.Do(req)
	}
	if _, err := post("/away"); err == nil || !strings.Contains(err.Error(), "another origin") {
		t.Fatalf("a redirect to another host: %v", err)
	}
	select {
	case got := <-leaked:
		t.Fatalf("the other host got %q", got)
	default:
	}
	resp, err := post("/here")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "secret args" {
		t.Fatalf("a redirect within the origin: %q", b)
	}
}
