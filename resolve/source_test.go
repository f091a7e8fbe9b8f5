package resolve

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
)

func TestHTTPProviderSourceCachesForTTL(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.Header.Get("X-Key") != "k" {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		if fail.Load() {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		w.Write([]byte(`{"items":[{"id":"LIST-9","display_name":"Q1 pilot list","related":[{"entity_type":"segment","id":"S1","display_name":"Pilots","role":"audience"}]}]}`))
	}))
	t.Cleanup(srv.Close)

	now := time.Unix(1000, 0)
	src := NewProviderSource(agentplane.ResolverSource{CatalogID: "mailer_lists"},
		&HTTPProvider{URL: srv.URL, Headers: map[string]string{"X-Key": "k"}}, time.Minute, func() time.Time { return now })
	ctx := context.Background()
	ix, stale, err := src.Index(ctx)
	if err != nil || stale != nil {
		t.Fatalf("Index: %v %v", stale, err)
	}
	if r := ix.Resolve("q1 pilot list", 5); !r.Strict() {
		t.Fatalf("not strict: %+v", r)
	}
	if it, _ := ix.Lookup("LIST-9"); len(it.Related) != 1 || it.Related[0].Header.ID != "S1" {
		t.Fatalf("related not decoded: %+v", it)
	}
	src.Index(ctx)
	if hits.Load() != 1 {
		t.Fatalf("fetched %d times within the TTL, want 1", hits.Load())
	}
	now = now.Add(2 * time.Minute)
	fail.Store(true)
	ix2, stale, err := src.Index(ctx)
	if err != nil || stale == nil || ix2 != ix {
		t.Fatalf("after a failed refresh want the stale index and a note; got %v %v", stale, err)
	}
	if hits.Load() != 2 || !strings.Contains(stale.Error(), "status 500") {
		t.Fatalf("hits %d, stale %v", hits.Load(), stale)
	}
	// backing off: the failure is remembered, nothing is fetched (a turn
	// resolving four slots once fetched four times)
	for range 4 {
		if ix3, stale, _ := src.Index(ctx); ix3 != ix || stale == nil {
			t.Fatal("the stale index was not served during the backoff")
		}
	}
	if hits.Load() != 2 {
		t.Fatalf("%d fetches during the backoff", hits.Load())
	}
	now = now.Add(2 * time.Second)
	fail.Store(false)
	if ix4, stale, err := src.Index(ctx); err != nil || stale != nil || ix4 == ix || hits.Load() != 3 {
		t.Fatalf("after the backoff: %v %v, %d fetches", stale, err, hits.Load())
	}
}

// TestSlowProviderFetchedOnce: callers arriving while a fetch runs share
// it (one GET, not one per caller); once there is an index, a refresh does
// not hold up callers served by the stale one.
func TestSlowProviderFetchedOnce(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	release := make(chan struct{})
	src := NewProviderSource(agentplane.ResolverSource{ProviderID: "p"}, ProviderFunc(func(ctx context.Context) ([]agentplane.ResolverItem, error) {
		hits.Add(1)
		<-release
		return []agentplane.ResolverItem{{Header: agentplane.EntityHeader{ID: "a", DisplayName: "A"}}}, nil
	}), time.Minute, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if ix, _, err := src.Index(context.Background()); err != nil || ix == nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(release)
	wg.Wait()
	if hits.Load() != 1 {
		t.Fatalf("%d fetches for 8 concurrent callers", hits.Load())
	}
}

func TestProviderSourceFailures(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/html":
			w.Write([]byte("<html>oops</html>"))
		case "/noid":
			w.Write([]byte(`[{"display_name":"x"}]`))
		case "/dup":
			w.Write([]byte(`[{"id":"a"},{"id":"a"}]`))
		case "/slow":
			time.Sleep(200 * time.Millisecond)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	tests := []struct {
		name string
		p    Provider
		want string
	}{
		{"NotFound", &HTTPProvider{URL: srv.URL + "/nope"}, "status 404"},
		{"NotJSON", &HTTPProvider{URL: srv.URL + "/html"}, "decode items"},
		{"MissingID", &HTTPProvider{URL: srv.URL + "/noid"}, "item 0: missing id"},
		{"DuplicateID", &HTTPProvider{URL: srv.URL + "/dup"}, `duplicate id "a"`},
		{"Timeout", &HTTPProvider{URL: srv.URL + "/slow", Timeout: 20 * time.Millisecond}, "deadline exceeded"},
		{"Refused", &HTTPProvider{URL: "http://127.0.0.1:1/x"}, "refused"},
		{"Panic", ProviderFunc(func(context.Context) ([]agentplane.ResolverItem, error) { panic("bug") }), "provider panicked: bug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := NewProviderSource(agentplane.ResolverSource{ProviderID: "p"}, tt.p, 0, nil)
			ix, _, err := src.Index(context.Background())
			if ix != nil || err == nil || !strings.Contains(err.Error(), tt.want) || agentplane.ErrorCode(err) != agentplane.CodeSourceUnavailable {
				t.Fatalf("Index() = %v, %v; want error containing %q", ix, err, tt.want)
			}
		})
	}
}

func FuzzDecodeItems(f *testing.F) {
	f.Add([]byte(`[{"id":"a","display_name":"A"}]`))
	f.Add([]byte(`{"items":[{"id":"a","related":[{"entity_type":"p","id":"1","role":"r"}]}]}`))
	f.Add([]byte(`{"items":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := DecodeItems(b)
		if err != nil {
			return
		}
		for _, it := range items {
			if it.Header.ID == "" {
				t.Fatal("decoded an item without id")
			}
		}
		NewIndex(items) // must not panic
	})
}

// TestDecodeItemsIsStrict: invalid UTF-8 and repeated member names are
// refused, not silently repaired.
func TestDecodeItemsIsStrict(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		"[{\"id\":\"a\",\"display_name\":\"caf\xe9\"}]": "invalid UTF-8",
		`[{"id":"a","id":"b"}]`:                         "duplicate member name",
		`[{"id":"a","ID":"b"}]`:                         "differ only in letter case",
	} {
		if _, err := DecodeItems([]byte(body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v", body, err)
		}
	}
}

// TestProviderAnswersEachCaller: an HTTP provider is told who asks (the
// Agentplane-Context header) and may answer each person with their own
// items; what it answered one person is never served to another, nor in
// another mode or on another active item — each is cached on its own.
func TestProviderAnswersEachCaller(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	fetches := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c struct {
			Principal struct {
				UserID string   `json:"user_id"`
				Roles  []string `json:"roles"`
			} `json:"principal"`
			Mode string `json:"mode"`
			AWC  struct {
				Entity *struct{ ID string } `json:"entity_header"`
			} `json:"active_work_context"`
		}
		if err := json.Unmarshal([]byte(r.Header.Get(ContextHeader)), &c); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		mu.Lock()
		fetches[c.Principal.UserID]++
		mu.Unlock()
		fmt.Fprintf(w, `[{"id":"T-%s-1","display_name":"%s's ticket in %s"}]`, c.Principal.UserID, c.Principal.UserID, c.Mode)
	}))
	t.Cleanup(srv.Close)
	src := NewProviderSource(agentplane.ResolverSource{CatalogID: "tickets"}, &HTTPProvider{URL: srv.URL}, time.Minute, nil)
	items := func(c Caller) string {
		ix, _, err := src.Index(WithCaller(context.Background(), c))
		if err != nil {
			t.Fatal(err)
		}
		return ix.Item(ix.Items(10)[0]).Header.DisplayName
	}
	alice := Caller{UserID: "alice", Roles: []string{"agent"}, Mode: "desk"}
	bob := Caller{UserID: "bøb", Mode: "desk"}
	if got := items(alice); got != "alice's ticket in desk" {
		t.Fatalf("alice: %q", got)
	}
	if got := items(bob); got != "bøb's ticket in desk" {
		t.Fatalf("bob got %q", got)
	}
	if got := items(alice); got != "alice's ticket in desk" || fetches["alice"] != 1 {
		t.Fatalf("alice again: %q after %d fetches (the cache is per caller)", got, fetches["alice"])
	}
	other := alice
	other.Mode = "triage"
	if got := items(other); got != "alice's ticket in triage" {
		t.Fatalf("another mode: %q", got)
	}
	active := alice
	active.AWC = agentplane.ActiveWorkContext{EntityType: "ticket", Entity: &agentplane.EntityHeader{ID: "T-9", DisplayName: "x"}}
	items(active)
	if fetches["alice"] != 3 {
		t.Fatalf("%d fetches for alice: a new active item is a new question", fetches["alice"])
	}
}
