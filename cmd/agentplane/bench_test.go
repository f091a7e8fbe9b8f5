package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentplane/agentplane/internal/testkit/servetest"
)

// BenchmarkRouteCommand measures `agentplane route` end to end on the demo
// configuration: JSON decoding, routing, JSON encoding, buffered I/O.
func BenchmarkRouteCommand(b *testing.B) {
	lines := []string{
		`{"text":"switch to ddr mode"}`,
		`{"text":"I want to work on email templates","ui":true}`,
		`{"text":"open the cfo template","ui":true}`,
		`{"text":"send this to the Q1 pilot list","mode":"sales"}`,
		`{"text":"what is the weather like in paris today?"}`,
		`{"text":"rewrite this template for the CFO persona"}`,
		`{"selection":{"command_id":"set_mode","id":"sales"}}`,
		`{"text":"open the renewel remnder template"}`,
	}
	const perRun = 10000
	var in bytes.Buffer
	for i := 0; i < perRun; i++ {
		in.WriteString(lines[i%len(lines)])
		in.WriteByte('\n')
	}
	input := in.Bytes()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		m := &Main{Stdin: bytes.NewReader(input), Stdout: io.Discard, Stderr: io.Discard}
		if code := m.Run(context.Background(), []string{"route"}); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
	b.ReportMetric(float64(b.N*perRun)/time.Since(start).Seconds(), "lines/s")
}

// BenchmarkSSEFanout runs `agentplane serve` (SQLite) as its own process,
// opens 1,000 event streams on one session, and measures: the server's
// memory per idle stream (Go heap and stacks in use, from its /metrics,
// and resident memory, from /proc), and the delivery of 50 turns' events
// to every stream — the delay from sending the turn to each stream
// reading its event, p50 and p99 over all deliveries (a missing or
// duplicated delivery fails).
func BenchmarkSSEFanout(b *testing.B) {
	const subscribers, turns = 1000, 50
	bin := servetest.Binary(b)
	url, cmd, _ := servetest.Serve(b, bin, "--db", filepath.Join(b.TempDir(), "fanout.db"), "--log-level", "warn")
	id := servetest.NewSession(b, url)
	for i := 0; i < b.N; i++ {
		heap0, rss0 := serverMemory(b, url, cmd.Process.Pid)
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: subscribers}}
		ctx, cancel := context.WithCancel(context.Background())
		got := make([][]time.Time, subscribers) // [subscriber][turn]
		var ready, done sync.WaitGroup
		base := int64(i*turns + 1) // the events before this round's turns
		for s := range subscribers {
			got[s] = make([]time.Time, turns)
			ready.Add(1)
			done.Add(1)
			go func() {
				defer done.Done()
				req, _ := http.NewRequestWithContext(ctx, "GET", url+"/v1/sessions/"+id+"/events", nil)
				req.Header.Set("Last-Event-ID", strconv.FormatInt(base, 10))
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					ready.Done()
					return
				}
				defer resp.Body.Close()
				ready.Done()
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 64<<10), 1<<20)
				for n := 0; n < turns && sc.Scan(); {
					v, ok := strings.CutPrefix(sc.Text(), "id: ")
					if !ok {
						continue
					}
					seq, _ := strconv.ParseInt(v, 10, 64)
					k := int(seq - base - 1)
					if k < 0 || k >= turns || !got[s][k].IsZero() {
						b.Errorf("subscriber %d: event %d unexpected or twice", s, seq)
						return
					}
					got[s][k] = time.Now()
					n++
				}
			}()
		}
		ready.Wait()
		time.Sleep(time.Second) // every stream is idle and subscribed
		heap1, rss1 := serverMemory(b, url, cmd.Process.Pid)
		b.ReportMetric(float64(heap1-heap0)/subscribers/1024, "KiB-heap+stack/stream")
		b.ReportMetric(float64(rss1-rss0)/subscribers/1024, "KiB-rss/stream")
		sent := make([]time.Time, turns)
		texts := []string{"switch to ddr mode", "switch to general mode"}
		for k := range turns {
			sent[k] = time.Now()
			if resp, body, err := servetest.PostJSON(url+"/v1/sessions/"+id+"/turns", map[string]string{"text": texts[k%2]}); err != nil || resp.StatusCode != 200 {
				b.Fatalf("%v %s", err, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		finished := make(chan struct{})
		go func() { done.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
			missing := 0
			for s := range got {
				for _, t := range got[s] {
					if t.IsZero() {
						missing++
					}
				}
			}
			b.Fatalf("%d of %d deliveries missing", missing, subscribers*turns)
		}
		cancel()
		var delays []time.Duration
		for s := range got {
			for k, t := range got[s] {
				if t.IsZero() {
					b.Fatalf("subscriber %d missed turn %d", s, k)
				}
				delays = append(delays, t.Sub(sent[k]))
			}
		}
		slices.Sort(delays)
		b.ReportMetric(float64(delays[len(delays)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(delays[len(delays)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(len(delays)), "deliveries")
		client.CloseIdleConnections()
	}
}

// serverMemory returns the serve process's Go heap and stacks in use (from
// its /metrics) and its resident memory (from /proc), in bytes.
func serverMemory(b *testing.B, url string, pid int) (goMem, rss float64) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		for _, name := range []string{"go_memstats_heap_inuse_bytes ", "go_memstats_stack_inuse_bytes "} {
			if v, ok := strings.CutPrefix(sc.Text(), name); ok {
				f, _ := strconv.ParseFloat(v, 64)
				goMem += f
			}
		}
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			rss = kb * 1024
		}
	}
	return goMem, rss
}
