package httpapi

import (
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/agentplane/agentplane"
)

// guard keeps other web pages out and slow clients short, before any
// route runs:
//
//   - without API keys the server acts as the local user, so a request
//     whose Host is not a loopback name or address is refused on every
//     route: a page on another origin that rebinds its DNS name to
//     127.0.0.1 reaches nothing;
//   - a POST must say Content-Type: application/json (a cross-site form,
//     sendBeacon or a fetch with a Blob body cannot without a preflight,
//     and no preflight is answered for origins not allowed);
//   - a request from another site (Sec-Fetch-Site cross-site or
//     same-site, or an Origin other than the Host) is refused, keys or
//     not, unless its origin is in Options.Origins, for which CORS is
//     answered — a POST, and a GET too on every route but the page, its
//     files and the public documents: a GET may open a stream that
//     dispatches the inbox, and a page must not make a browser do that
//     on its behalf (a no-cors GET cannot be stopped by CORS);
//   - a request body has Options.BodyTimeout to arrive, counted from the
//     request's start: a body stalled or sent a byte at a time is cut, and
//     the connection with it, whether the handler read it or refused the
//     request without reading (401 comes before any body is read, and a
//     response to a body not read to its end closes the connection rather
//     than wait for the rest of it).
func (s *Server) guard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	for _, o := range s.origins {
		cop.AddTrustedOrigin(o) // checked when the options are made (CheckOrigins)
	}
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, withStatus(http.StatusForbidden, agentplane.CodeUnauthorized,
			"cross-origin request refused: %s %s from another site (Origin %q); serve the client from this origin, or list its origin with --cors-origin",
			r.Method, truncate(r.URL.Path, 100), truncate(r.Header.Get("Origin"), 100)))
	}))
	protected := cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.auth.Open() && !loopbackHost(r.Host) {
			s.writeError(w, r, withStatus(http.StatusMisdirectedRequest, agentplane.CodeUnauthorized,
				"Host %q is not a loopback name: without API keys this server answers only requests addressed to localhost, 127.0.0.1 or [::1]", truncate(r.Host, 100)))
			return
		}
		if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(s.origins, origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", "X-Request-ID, Location, Mcp-Session-Id")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, X-Request-ID, Mcp-Session-Id, Mcp-Protocol-Version")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && !public(r.URL.Path) && s.crossSite(r) {
			s.writeError(w, r, withStatus(http.StatusForbidden, agentplane.CodeUnauthorized,
				"cross-site request refused: GET %s from another site (Sec-Fetch-Site %q, Origin %q); serve the client from this origin, or list its origin with --cors-origin",
				truncate(r.URL.Path, 100), truncate(r.Header.Get("Sec-Fetch-Site"), 20), truncate(r.Header.Get("Origin"), 100)))
			return
		}
		if r.Method == http.MethodPost {
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				s.writeError(w, r, withStatus(http.StatusUnsupportedMediaType, agentplane.CodeInvalidInput,
					"Content-Type %q: a POST must send application/json (an empty body too)", truncate(r.Header.Get("Content-Type"), 100)))
				return
			}
		}
		if r.Body != nil && r.Body != http.NoBody {
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(time.Now().Add(s.bodyTimeout))
			body := &deadlineBody{ReadCloser: r.Body, rc: rc}
			r.Body = body
			w = &unreadBody{ResponseWriter: w, body: body}
		}
		protected.ServeHTTP(w, r)
	})
}

// public reports whether a path is one anyone may GET from anywhere: the
// page and its files (a link from another site opens it), health,
// metrics and the public documents. Nothing there changes anything.
func public(path string) bool {
	switch path {
	case "/", "/healthz", "/readyz", "/metrics", "/v1/openapi.json", "/v1/auth":
		return true
	}
	return strings.HasPrefix(path, "/ui/") || strings.HasPrefix(path, "/.well-known/")
}

// crossSite reports whether a request comes from a page of another site
// than this server's (not an origin of Options.Origins): as a browser's
// Sec-Fetch-Site says, or, from a browser that does not send it, as its
// Origin says. A request that is not a browser's says neither.
func (s *Server) crossSite(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin != "" && slices.Contains(s.origins, origin) {
		return false
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return true
	case "same-origin", "none":
		return false
	}
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	return err != nil || !strings.EqualFold(u.Host, r.Host)
}

// unreadBody is the response to a request whose body may not be read to
// its end: answered before that (a 401, a refusal), the connection is
// closed rather than kept — net/http would otherwise read what is left
// of the body before sending the answer, and a body that stalls would
// hold the answer until the body timeout.
type unreadBody struct {
	http.ResponseWriter
	body   *deadlineBody
	headed bool
}

func (u *unreadBody) WriteHeader(code int) {
	if !u.headed && code >= 200 {
		u.headed = true
		if !u.body.done.Load() {
			u.Header().Set("Connection", "close")
		}
	}
	u.ResponseWriter.WriteHeader(code)
}

func (u *unreadBody) Write(b []byte) (int, error) {
	if !u.headed {
		u.WriteHeader(http.StatusOK)
	}
	return u.ResponseWriter.Write(b)
}

func (u *unreadBody) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// deadlineBody is a request body with a read deadline on its connection;
// read to its end, it lifts the deadline, so a handler that runs long
// after reading (a turn, a stream) is not cut.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done atomic.Bool // read to its end
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done.Load() {
		b.done.Store(true)
		b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// loopbackHost reports whether a Host header names this machine's
// loopback interface: localhost (or a name under .localhost) or a
// loopback address, with any port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
