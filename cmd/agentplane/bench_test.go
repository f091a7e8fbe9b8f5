package main

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
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
