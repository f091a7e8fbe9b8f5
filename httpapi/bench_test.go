package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/httpapi"
	"github.com/agentplane/agentplane/plane"
	"github.com/agentplane/agentplane/plane/drivers"
	"github.com/agentplane/agentplane/workflow"
)

// BenchmarkTurns measures turns per second through the HTTP API over
// loopback (keep-alive, one session per client, each turn a mode switch
// through the gate) beside the same turns taken in-process through the
// core on the same store, interleaved in 200 ms slices so both meet the
// same machine. It reports both rates, their ratio, and the HTTP turns'
// p50 and p99 latency; and, interleaved too, the rate of the same client
// against a server that does nothing but read the body and write a
// response of the same size (the floor net/http sets on this machine).
func BenchmarkTurns(b *testing.B) {
	for _, kind := range []string{"memory", "sqlite"} {
		for _, clients := range []int{1, 16, 64} {
			b.Run(fmt.Sprintf("%s/clients=%d", kind, clients), func(b *testing.B) {
				db := ""
				if kind == "sqlite" {
					db = filepath.Join(b.TempDir(), "bench.db")
				}
				rt, err := plane.Open(context.Background(), plane.Options{Config: core.Source{YAML: demo.YAML, Name: demo.Name}, DB: db, OpenStore: drivers.Open,
					Core: core.Options{Programs: demo.Programs(nil), Observer: httpapi.NewMetrics().Observer(nil)}})
				if err != nil {
					b.Fatal(err)
				}
				defer rt.Close(time.Minute)
				c := rt.Core
				srv := httptest.NewServer(httpapi.New(rt, nil).Handler())
				defer srv.Close()
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients, MaxConnsPerHost: clients}}
				defer client.CloseIdleConnections()

				inproc, overHTTP := make([]string, clients), make([]string, clients)
				for i := range clients {
					s, _ := c.Start(context.Background(), core.Start{Principal: agentplane.LocalPrincipal})
					inproc[i] = s.ID
					s, _ = c.Start(context.Background(), core.Start{Principal: agentplane.LocalPrincipal})
					overHTTP[i] = s.ID
				}
				texts := []string{"switch to ddr mode", "switch to general mode"}
				bodies := [][]byte{[]byte(`{"text":"switch to ddr mode"}`), []byte(`{"text":"switch to general mode"}`)}
				inprocTurn := func(w, i int) error {
					t, err := c.Turn(context.Background(), core.TurnRequest{SessionID: inproc[w], Principal: agentplane.LocalPrincipal,
						Input: agentplane.TurnInput{Text: texts[i%2]}})
					if err == nil && (t.Result == nil || t.Result.Status != agentplane.StatusSuccess) {
						err = fmt.Errorf("turn: %+v", t.Result)
					}
					return err
				}
				httpTurn := func(w, i int) error {
					resp, err := client.Post(srv.URL+"/v1/sessions/"+overHTTP[w]+"/turns", "application/json", bytes.NewReader(bodies[i%2]))
					if err != nil {
						return err
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						return fmt.Errorf("status %d", resp.StatusCode)
					}
					return nil
				}
				// the floor: same client, a handler that answers a recorded answer
				resp, _ := client.Post(srv.URL+"/v1/sessions/"+overHTTP[0]+"/turns", "application/json", bytes.NewReader(bodies[0]))
				canned, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				floor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					w.Header().Set("Content-Type", "application/json")
					w.Write(canned)
				}))
				defer floor.Close()
				floorTurn := func(w, i int) error {
					resp, err := client.Post(floor.URL+"/v1/sessions/x/turns", "application/json", bytes.NewReader(bodies[i%2]))
					if err != nil {
						return err
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					return nil
				}
				next := [3][]int{make([]int, clients), make([]int, clients), make([]int, clients)}
				var inN, httpN, floorN int
				var inT, httpT, floorT time.Duration
				var lat []time.Duration
				b.ResetTimer()
				for range b.N {
					n, d, _ := slice(b, next[0], 200*time.Millisecond, inprocTurn)
					inN, inT = inN+n, inT+d
					n, d, l := slice(b, next[1], 200*time.Millisecond, httpTurn)
					httpN, httpT = httpN+n, httpT+d
					lat = append(lat, l...)
					n, d, _ = slice(b, next[2], 200*time.Millisecond, floorTurn)
					floorN, floorT = floorN+n, floorT+d
				}
				in, h, f := float64(inN)/inT.Seconds(), float64(httpN)/httpT.Seconds(), float64(floorN)/floorT.Seconds()
				b.ReportMetric(in, "inproc-turns/s")
				b.ReportMetric(h, "http-turns/s")
				b.ReportMetric(h/in, "ratio")
				b.ReportMetric(f, "floor-req/s")
				b.ReportMetric(quantile(lat, .5), "p50-ms")
				b.ReportMetric(quantile(lat, .99), "p99-ms")
			})
		}
	}
}

// slice runs op on len(next) goroutines for d and returns how many
// operations completed, how long it took and each one's latency.
func slice(b *testing.B, next []int, d time.Duration, op func(w, i int) error) (int, time.Duration, []time.Duration) {
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lat []time.Duration
	for w := range next {
		wg.Go(func() {
			var mine []time.Duration
			for time.Now().Before(deadline) {
				t := time.Now()
				if err := op(w, next[w]); err != nil {
					b.Error(err)
					return
				}
				mine = append(mine, time.Since(t))
				next[w]++
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return len(lat), time.Since(start), lat
}

// quantile returns the q-quantile of the durations in milliseconds.
func quantile(d []time.Duration, q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[int(q*float64(len(d)-1))].Microseconds()) / 1000
}

// BenchmarkLLMDelta measures the latency agentplane adds to the model's
// streamed text: an OpenAI-compatible endpoint on loopback streams 200
// chunks 2 ms apart for a turn through the API; each chunk's delay is from
// the endpoint flushing it to an SSE client of the session reading its
// llm_delta event (SDK parsing, the hub, the HTTP stream). p50 and p99
// over all chunks.
func BenchmarkLLMDelta(b *testing.B) {
	const chunks = 200
	var mu sync.Mutex
	sent := map[string]time.Time{}
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		write := func(delta string, finish string) {
			fin := "null"
			if finish != "" {
				fin = `"` + finish + `"`
			}
			fmt.Fprintf(w, `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":%s}]}`+"\n\n", delta, fin)
			f.Flush()
		}
		for i := range chunks {
			tag := fmt.Sprintf("<%d>", i)
			mu.Lock()
			sent[tag] = time.Now() // just before the write and flush
			mu.Unlock()
			write(tag, "")
			time.Sleep(2 * time.Millisecond)
		}
		write("", "stop")
		io.WriteString(w, "data: [DONE]\n\n")
		f.Flush()
	}))
	defer provider.Close()
	env := map[string]string{"AGENTPLANE_LLM_BASE_URL": provider.URL + "/v1", "AGENTPLANE_LLM_MODEL": "m"}
	rt, err := plane.Open(context.Background(), plane.Options{Config: core.Source{YAML: demo.YAML, Name: demo.Name},
		Core: core.Options{Programs: demo.Programs(nil)}, LLM: true, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(time.Minute)
	c, hub := rt.Core, rt.Hub
	api := httpapi.New(rt, nil)
	srv := httptest.NewServer(api.Handler())
	defer srv.Close()
	var delays []time.Duration
	for range b.N {
		s, _ := c.Start(context.Background(), core.Start{Principal: agentplane.LocalPrincipal})
		resp, err := http.Get(srv.URL + "/v1/sessions/" + s.ID + "/events?after=1")
		if err != nil {
			b.Fatal(err)
		}
		for hub.Subscribers() == 0 {
			time.Sleep(time.Millisecond)
		}
		got := make(chan []time.Duration)
		go func() {
			var d []time.Duration
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				line := sc.Text()
				if !strings.HasPrefix(line, `data: {"text":"`) {
					continue
				}
				now := time.Now()
				var delta struct{ Text string }
				json.Unmarshal([]byte(line[6:]), &delta)
				mu.Lock()
				at, ok := sent[delta.Text]
				mu.Unlock()
				if ok {
					d = append(d, now.Sub(at))
				}
				if delta.Text == fmt.Sprintf("<%d>", chunks-1) {
					break
				}
			}
			got <- d
		}()
		post, err := http.Post(srv.URL+"/v1/sessions/"+s.ID+"/turns", "application/json", strings.NewReader(`{"text":"hello there"}`))
		if err != nil || post.StatusCode != 200 {
			b.Fatalf("%v %v", post, err)
		}
		post.Body.Close()
		d := <-got
		resp.Body.Close()
		if len(d) != chunks {
			b.Fatalf("%d of %d chunks reached the stream", len(d), chunks)
		}
		delays = append(delays, d...)
	}
	b.ReportMetric(quantile(delays, .5), "p50-ms")
	b.ReportMetric(quantile(delays, .99), "p99-ms")
}

// BenchmarkApprovalRoundTrip measures a workflow approval over HTTP on
// loopback: POST /v1/workflows/{id}/commands with approval_response to
// the 200 that says it was applied (queued, processed by the workflow's
// runner, committed with the workflow's new state), on SQLite (FULL) and
// in memory. Each op is one approval of a chain of external sends; the
// wait for the next approval is not timed. p50 and p99 in ms.
func BenchmarkApprovalRoundTrip(b *testing.B) {
	for _, kind := range []string{"memory", "sqlite"} {
		b.Run(kind, func(b *testing.B) {
			db := ""
			if kind == "sqlite" {
				db = filepath.Join(b.TempDir(), "bench.db")
			}
			rt, err := plane.Open(context.Background(), plane.Options{Config: core.Source{YAML: demo.YAML, Name: demo.Name}, DB: db, OpenStore: drivers.Open,
				Core: core.Options{Programs: demo.Programs(nil)}, Workflows: workflow.Options{Memory: true}})
			if err != nil {
				b.Fatal(err)
			}
			defer rt.Close(time.Minute)
			c, eng := rt.Core, rt.Workflows
			srv := httptest.NewServer(httpapi.New(rt, nil).Handler())
			defer srv.Close()
			client := srv.Client()
			sess, _ := c.Start(context.Background(), core.Start{Principal: agentplane.LocalPrincipal, Mode: "sales"})
			// a chain of sends, each its own layer and approval
			chain := func() string {
				tasks := []map[string]any{{"id": "tpl", "tool": "agent_set_active_entity", "args": map[string]any{"catalog_id": "email_templates", "id": "TPL-123"}}}
				prev := "tpl"
				for i := range 10 {
					id := fmt.Sprint("s", i)
					tasks = append(tasks, map[string]any{"id": id, "tool": "send_template", "args": map[string]any{"list_id": "LIST-9"}, "depends_on": []string{prev}})
					prev = id
				}
				body, _ := json.Marshal(map[string]any{"session_id": sess.ID, "tasks": tasks, "wait": true})
				resp, err := client.Post(srv.URL+"/v1/workflows", "application/json", bytes.NewReader(body))
				if err != nil || resp.StatusCode != 201 {
					b.Fatalf("%v %v", resp, err)
				}
				var created httpapi.WorkflowCreated
				json.NewDecoder(resp.Body).Decode(&created)
				resp.Body.Close()
				return created.WorkflowID
			}
			id := chain()
			var after int64
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				w, err := eng.Wait(context.Background(), id, agentplane.LocalPrincipal, after)
				if err != nil {
					b.Fatal(err)
				}
				if w.Status == workflow.StatusCompleted {
					id, after = chain(), 0
					if w, err = eng.Wait(context.Background(), id, agentplane.LocalPrincipal, 0); err != nil {
						b.Fatal(err)
					}
				}
				if w.Approval == nil {
					b.Fatalf("%+v", w)
				}
				after = w.Seq
				body := []byte(`{"type":"approval_response","approved":true,"checkpoint_id":"` + w.Approval.CheckpointID + `"}`)
				b.StartTimer()
				t0 := time.Now()
				resp, err := client.Post(srv.URL+"/v1/workflows/"+id+"/commands", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(t0))
				if resp.StatusCode != 200 {
					b.Fatalf("approval: %d", resp.StatusCode)
				}
			}
			b.ReportMetric(quantile(lat, .5), "p50-ms")
			b.ReportMetric(quantile(lat, .99), "p99-ms")
		})
	}
}
