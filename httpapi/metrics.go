package httpapi

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentplane/agentplane"
	"github.com/agentplane/agentplane/core"
)

// Metrics are the server's Prometheus metrics, on a registry of their
// own (no global state): turns by decision, gate results by status and
// code, latencies of routing, the gate, store commits and HTTP requests,
// open streams, and MCP servers' health.
type Metrics struct {
	reg      *prometheus.Registry
	turns    *prometheus.CounterVec
	results  *prometheus.CounterVec
	route    prometheus.Histogram
	gate     prometheus.Histogram
	commit   prometheus.Histogram
	requests *prometheus.HistogramVec
	streams  *prometheus.GaugeVec
}

// latency buckets, in seconds: 50 µs to 10 s
var buckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10}

// NewMetrics returns the metrics, with Go and process collectors.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.turns = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentplane_turns_total", Help: "User turns by the router's decision."}, []string{"decision"})
	m.results = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "agentplane_gate_results_total", Help: "Gate results by status and error code."}, []string{"status", "code"})
	m.route = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentplane_route_seconds", Help: "Time to route a turn.", Buckets: buckets})
	m.gate = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentplane_gate_seconds", Help: "Time through the gate, store commit included.", Buckets: buckets})
	m.commit = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "agentplane_store_commit_seconds", Help: "Time to commit to the store.", Buckets: buckets})
	m.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "agentplane_http_request_seconds", Help: "HTTP requests by route pattern and status.", Buckets: buckets}, []string{"route", "status"})
	m.streams = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "agentplane_open_streams", Help: "Open event streams by transport."}, []string{"transport"})
	m.reg.MustRegister(m.turns, m.results, m.route, m.gate, m.commit, m.requests, m.streams,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// WatchMCP adds a gauge of each downstream MCP server's health, read when
// the metrics are scraped.
// health is core.Core.MCPHealth: the servers mounted now, by name.
func (m *Metrics) WatchMCP(health func() []core.MCPState) {
	for _, srv := range health() {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "agentplane_mcp_server_up", Help: "1 when the downstream MCP server is connected.",
			ConstLabels: prometheus.Labels{"server": srv.Name}}, func() float64 {
			for _, h := range health() {
				if h.Name == srv.Name && h.Up {
					return 1
				}
			}
			return 0
		}))
	}
}

// Observer returns the core observer feeding the metrics; committed, when
// set, is also called on every commit (the event hub).
func (m *Metrics) Observer(committed func(string, int64, time.Duration)) *core.Observer {
	return &core.Observer{
		Committed: func(session string, seq int64, took time.Duration) {
			m.commit.Observe(took.Seconds())
			if committed != nil {
				committed(session, seq, took)
			}
		},
		Routed: func(d agentplane.Decision, took time.Duration) {
			m.turns.WithLabelValues(string(d.Action)).Inc()
			m.route.Observe(took.Seconds())
		},
		Executed: func(res agentplane.ExecutionResult, took time.Duration) {
			code := ""
			if res.Error != nil {
				code = res.Error.Code
			}
			m.results.WithLabelValues(string(res.Status), code).Inc()
			m.gate.Observe(took.Seconds())
		},
	}
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}
