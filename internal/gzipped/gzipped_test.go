package gzipped

import (
	"compress/gzip"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAccepts(t *testing.T) {
	for h, want := range map[string]bool{
		"": false, "gzip": true, "br, gzip;q=0.8": true, "GZIP": true, "*": true, "gzip;q=0": false, "gzip; q=0.000": false, "identity": false, "deflate, br": false,
	} {
		if got := Accepts(h); got != want {
			t.Errorf("Accepts(%q) = %v", h, got)
		}
	}
}

func TestWrite(t *testing.T) {
	body := []byte(strings.Repeat(`{"seq":1,"kind":"turn"},`, 100))
	for _, c := range []struct {
		accept string
		body   []byte
		zipped bool
	}{{"gzip", body, true}, {"", body, false}, {"gzip", []byte(`{}`), false}} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("Accept-Encoding", c.accept)
		w := httptest.NewRecorder()
		Write(w, r, "application/json", c.body)
		got := w.Body.Bytes()
		if zipped := w.Header().Get("Content-Encoding") == "gzip"; zipped != c.zipped {
			t.Fatalf("accept %q, %d bytes: gzip %v", c.accept, len(c.body), zipped)
		}
		if c.zipped {
			zr, err := gzip.NewReader(w.Body)
			if err != nil {
				t.Fatal(err)
			}
			if got, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
			if w.Body.Len() >= len(body)/4 {
				t.Errorf("%d bytes compressed to %d", len(body), w.Body.Len())
			}
		}
		if string(got) != string(c.body) || w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Vary") != "Accept-Encoding" {
			t.Fatalf("accept %q: body %q, header %v", c.accept, got, w.Header())
		}
	}
}
