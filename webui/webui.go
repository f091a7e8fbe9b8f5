// Package webui is agentplane's web page: a chat with pickers, option
// buttons and confirmation dialogs, the mode and the active work context,
// the inbox, workflows awaiting the person, and past sessions. It is
// plain HTML, CSS and JavaScript modules (app.js wires one module per
// section of the page; docs/webui.md lists them), embedded in the binary
// and served by `agentplane serve` at /; the page talks to the /v1 API and
// its event streams like any other client, with the API key the person
// gives it (kept in the tab's sessionStorage, sent as a bearer token).
//
// There is no build step: what is in assets/ is what the browser gets,
// compressed once when the handler is made.
package webui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/agentplane/agentplane/internal/gzipped"
)

//go:embed assets
var assets embed.FS

// Asset is one embedded file as served: its bytes, gzipped bytes, type
// and entity tag.
type Asset struct {
	Name string
	Type string
	Raw  []byte
	Gzip []byte
	ETag string
}

// Handler serves the page at / and its files under /ui/.
type Handler struct {
	files map[string]*Asset // by URL path
}

// contentSecurity lets the page load only its own files and talk only to
// its own origin: text a person or a catalog supplies can never run as
// script, even if it were ever inserted as HTML.
const contentSecurity = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// New returns the handler, with every asset compressed.
func New() (*Handler, error) {
	h := &Handler{files: map[string]*Asset{}}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		w.Write(raw)
		w.Close()
		sum := sha256.Sum256(raw)
		name := strings.TrimPrefix(p, "assets/")
		typ := mime.TypeByExtension(path.Ext(name))
		if typ == "" {
			typ = "application/octet-stream"
		}
		a := &Asset{Name: name, Type: typ, Raw: raw, Gzip: z.Bytes(), ETag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		url := "/ui/" + name
		if name == "index.html" {
			url = "/"
		}
		h.files[url] = a
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("webui: %w", err)
	}
	return h, nil
}

// Assets returns what the page loads, for measuring it.
func (h *Handler) Assets() []*Asset {
	out := make([]*Asset, 0, len(h.files))
	for _, a := range h.files {
		out = append(out, a)
	}
	return out
}

// ServeHTTP serves GET and HEAD of the page and its files, gzipped when
// the client accepts it, revalidated by entity tag.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, ok := h.files[r.URL.Path]
	if !ok {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.Type)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", a.ETag)
	hd.Set("Vary", "Accept-Encoding")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	if a.Name == "index.html" {
		hd.Set("Content-Security-Policy", contentSecurity)
		hd.Set("X-Frame-Options", "DENY")
	}
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, a.ETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.Raw
	if gzipped.Accepts(r.Header.Get("Accept-Encoding")) {
		hd.Set("Content-Encoding", "gzip")
		body = a.Gzip
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}
