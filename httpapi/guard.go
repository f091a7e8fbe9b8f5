package httpapi

import (
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
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
//   - a state-changing request from another site (Sec-Fetch-Site
//     cross-site or same-site, or an Origin other than the Host) is
//     refused, keys or not, unless its origin is in Options.Origins, for
//     which CORS is answered;
//   - a request body has Options.BodyTimeout to arrive, counted from the
//     request's start: a body stalled or sent a byte at a time is cut, and
//     the connection with it, whether the handler read it or refused the
//     request without reading (401 comes before any body is read).
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
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		protected.ServeHTTP(w, r)
	})
}

// deadlineBody is a request body with a read deadline on its connection;
// read to its end, it lifts the deadline, so a handler that runs long
// after reading (a turn, a stream) is not cut.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
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
