package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A panic in a handler is recovered, logged with the request id, and
// answered 500 with the envelope and nothing of the panic's details.
func TestPanicIsAnInternalError(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{log: slog.New(slog.NewJSONHandler(&logs, nil)), idPrefix: "t-"}
	h := s.observe(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("secret detail") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/x", nil))
	var body ErrorBody
	if rec.Code != 500 || json.Unmarshal(rec.Body.Bytes(), &body) != nil || body.Error.Code != "internal" || strings.Contains(rec.Body.String(), "secret") {
		t.Fatalf("%d %s", rec.Code, rec.Body)
	}
	id := rec.Header().Get("X-Request-ID")
	if !strings.Contains(logs.String(), "secret detail") || !strings.Contains(logs.String(), id) {
		t.Fatalf("the panic was not logged with the request id %q: %s", id, logs.String())
	}
}

func TestCheckAddr(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:8080": true, "localhost:1": true, "[::1]:80": true, "127.0.0.2:9": true,
		"0.0.0.0:8080": false, ":8080": false, "10.0.0.1:80": false, "[::]:80": false, "example.com:80": false,
		// names that merely start like loopback ones are resolved by DNS
		"127.evil:80": false, "127.0.0.1.evil.example:80": false, "localhost.evil.example:80": false} {
		if err := CheckAddr(addr, 0); (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
		if err := CheckAddr(addr, 1); err != nil {
			t.Errorf("%s with keys: %v", addr, err)
		}
	}
}

// Loopback is decided by the address a listener has bound, not by the
// name it was given: a name that resolved elsewhere (evil.localhost
// mapped to another address in /etc/hosts), the unspecified address and
// any other interface's are refused without credentials.
func TestCheckListener(t *testing.T) {
	for addr, ok := range map[net.Addr]bool{
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}: true, &net.TCPAddr{IP: net.IPv6loopback, Port: 1}: true,
		&net.TCPAddr{IP: net.IPv4(127, 9, 9, 9), Port: 1}: true,
		&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 80}: false, &net.TCPAddr{IP: net.IPv4zero, Port: 80}: false,
		&net.TCPAddr{IP: net.IPv6unspecified, Port: 80}: false, &net.TCPAddr{IP: net.IPv4(192, 168, 0, 7), Port: 8080}: false,
		&net.UnixAddr{Name: "/tmp/x.sock", Net: "unix"}: false,
	} {
		if err := CheckListener(addr, 0); (err == nil) != ok {
			t.Errorf("%s: %v", addr, err)
		}
		if err := CheckListener(addr, 1); err != nil {
			t.Errorf("%s with credentials: %v", addr, err)
		}
	}
	// real listeners: on every address of this machine's interfaces
	addrs, _ := net.InterfaceAddrs()
	tried := 0
	for _, a := range append(addrs, &net.IPNet{IP: net.IPv4zero}) {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ipn.IP.String(), "0"))
		if err != nil {
			continue
		}
		err = CheckListener(ln.Addr(), 0)
		ln.Close()
		if (err == nil) != ipn.IP.IsLoopback() {
			t.Errorf("a listener on %s: %v", ln.Addr(), err)
		}
		tried++
	}
	if tried < 2 {
		t.Fatalf("only %d listeners tried", tried)
	}
}

func TestCheckAddrRefusesNonsense(t *testing.T) {
	for _, addr := range []string{"127.0.0.1", "nope", ""} {
		if err := CheckAddr(addr, 1); err == nil {
			t.Errorf("%q accepted", addr)
		}
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, ok := range map[string]bool{"localhost": true, "localhost:8080": true, "LOCALHOST.": true, "app.localhost:1": true,
		"127.0.0.1:8080": true, "127.9.9.9": true, "[::1]:80": true, "::1": true,
		"evil.example": false, "evil.example:8080": false, "127.evil": false, "localhost.evil.example": false, "": false,
		"0.0.0.0:8080": false, "[::]:80": false, "10.0.0.1": false} {
		if loopbackHost(host) != ok {
			t.Errorf("%q: want %v", host, ok)
		}
	}
}

func TestCheckOrigin(t *testing.T) {
	for o, ok := range map[string]bool{"https://app.example.com": true, "http://localhost:3000": true,
		"https://app.example.com/": false, "app.example.com": false, "ftp://x": false, "https://u@x": false, "https://x?q=1": false, "*": false} {
		if err := CheckOrigin(o); (err == nil) != ok {
			t.Errorf("%q: %v", o, err)
		}
	}
}

// Health checks (a balancer's, every second or two per instance) are
// logged only at debug; every other request at info.
func TestHealthChecksAreLoggedAtDebug(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		for path, quiet := range map[string]bool{"/healthz": true, "/readyz": true, "/v1/modes": false, "/metrics": false, "/nowhere": false} {
			var logs bytes.Buffer
			s := &Server{log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: level})), idPrefix: "t-"}
			mux := http.NewServeMux()
			for _, p := range []string{"GET /healthz", "GET /readyz", "GET /v1/modes", "GET /metrics"} {
				mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") })
			}
			s.observe(mux).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
			logged := strings.Contains(logs.String(), `"msg":"http"`) && strings.Contains(logs.String(), `"path":"`+path+`"`)
			if want := level == slog.LevelDebug || !quiet; logged != want {
				t.Errorf("GET %s at level %s: logged %v, want %v: %s", path, level, logged, want, logs.String())
			}
		}
	}
}
