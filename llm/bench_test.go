package llm_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/config"
	"github.com/agentplane/agentplane/core"
	"github.com/agentplane/agentplane/demo"
	"github.com/agentplane/agentplane/internal/testkit/llmtest"
	"github.com/agentplane/agentplane/llm"
	"github.com/agentplane/agentplane/store/sqlite"
)

// BenchmarkLLMTurn measures the control plane's own cost of an LLM turn
// with one tool call — two requests built (system prompt, history from
// the audit chain, the active tools rendered), the call through the gate,
// two exchanges and the call audited — against a model that answers at
// once (llm.Script: no network, no JSON parsing of a response). It
// reports p50 and p99 per turn. The session is new for each turn, with an
// active template (its history is that one turn).
func BenchmarkLLMTurn(b *testing.B) {
	bench := func(b *testing.B, model func() llm.Model) {
		c, err := core.New(context.Background(), core.Source{YAML: demo.YAML, Name: demo.Name},
			&core.Options{Programs: demo.Programs(nil)})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			s, _ := c.Start(ctx, core.Start{Mode: "sales", Principal: "p"})
			c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "p", Input: agentplane.TurnInput{Text: "open the Q1 CFO Outreach template"}})
			c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "p", Input: agentplane.TurnInput{Text: "what does this persona care about?"}})
			a := llm.New(c, model(), config.LLM{MaxToolRounds: 4, MaxHistoryTurns: 10}, nil)
			b.StartTimer()
			start := time.Now()
			r, err := a.Turn(ctx, llm.TurnRequest{SessionID: s.ID, Principal: "p"})
			lat = append(lat, time.Since(start))
			if err != nil || len(r.Calls) != 1 || r.Calls[0].Status != agentplane.StatusSuccess || r.Text == "" {
				b.Fatalf("%+v %v", r, err)
			}
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	replies := func() []agentplane.LLMResponse {
		return []agentplane.LLMResponse{
			{ToolCalls: []agentplane.LLMToolCall{{ID: "call_0", Name: "catalog_search", Arguments: `{"catalog_id":"mailer_lists","query":"pilot"}`}}},
			{Text: "CFOs care about cash flow and predictable spend."},
		}
	}
	b.Run("script", func(b *testing.B) {
		bench(b, func() llm.Model { return &llm.Script{Replies: replies()} })
	})
	// the same through the OpenAI SDK against an endpoint on loopback that
	// answers at once: what the HTTP client, streaming and parsing add
	b.Run("loopback-endpoint", func(b *testing.B) {
		srv := llmtest.New(b)
		s := llm.Settings{LLM: config.LLM{BaseURL: srv.URL, Model: "test-model", Timeout: 10 * time.Second}}
		m := llm.NewOpenAI(s, nil)
		bench(b, func() llm.Model {
			srv.Add(llmtest.Reply{ToolCalls: []llmtest.Call{{Name: "catalog_search", Arguments: `{"catalog_id":"mailer_lists","query":"pilot"}`}}},
				llmtest.Reply{Text: "CFOs care about cash flow and predictable spend."})
			return m
		})
	})
}

// BenchmarkLLMTurnAtLength measures the control plane's cost of an LLM
// turn (a reply with no tool call, against a model that answers at once)
// at turn 1, 1,000 and 10,000 of one session kept in SQLite: what the
// turn reads, builds and writes must not grow with what came before.
func BenchmarkLLMTurnAtLength(b *testing.B) {
	for _, n := range []int{1, 1_000, 10_000} {
		b.Run(fmt.Sprintf("turn=%d", n), func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "a.db"), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			c, err := core.New(ctx, core.Source{YAML: demo.YAML, Name: demo.Name}, &core.Options{Store: st, Programs: demo.Programs(nil)})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			model := &endless{}
			a := llm.New(c, model, config.LLM{MaxToolRounds: 4, MaxHistoryTurns: 10}, nil)
			s, _ := c.Start(ctx, core.Start{Mode: "sales", Principal: "p"})
			turn := func() {
				if _, err := c.Turn(ctx, core.TurnRequest{SessionID: s.ID, Principal: "p", Input: agentplane.TurnInput{Text: "what does this persona care about?"}}); err != nil {
					b.Fatal(err)
				}
			}
			for range n - 1 {
				turn()
				if _, err := a.Turn(ctx, llm.TurnRequest{SessionID: s.ID, Principal: "p"}); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				turn()
				b.StartTimer()
				start := time.Now()
				r, err := a.Turn(ctx, llm.TurnRequest{SessionID: s.ID, Principal: "p"})
				lat = append(lat, time.Since(start))
				if err != nil || r.Text == "" {
					b.Fatalf("%+v %v", r, err)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		})
	}
}

// endless is a model that always answers with the same text at once.
type endless struct{}

func (endless) Complete(_ context.Context, _ llm.Request, _ func(string)) (agentplane.LLMResponse, int, error) {
	return agentplane.LLMResponse{Text: "CFOs care about cash flow and predictable spend."}, 1, nil
}

func (endless) Name() string { return "endless" }
