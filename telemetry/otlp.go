package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// exporter sends spans to an OTLP/HTTP endpoint as protobuf. It is
// agentplane's own rather than otlptracehttp because that exporter links
// gRPC and its generated services (through the OTLP collector package),
// which grew the binary by 25 MB for a protocol agentplane does not speak;
// the message is the same (TracesData and ExportTraceServiceRequest share
// their one field), encoded with the official OTLP protobuf types.
type exporter struct {
	url      string
	headers  map[string]string
	timeout  time.Duration
	compress bool
	client   *http.Client
}

// newExporter reads the exporter's settings from the environment: the
// endpoint (given), OTEL_EXPORTER_OTLP_[TRACES_]HEADERS, _TIMEOUT (ms) and
// _COMPRESSION (gzip or none).
func newExporter(endpoint string, getenv func(string) string) (*exporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("the OTLP endpoint %q: want an http:// or https:// URL", endpoint)
	}
	e := &exporter{url: endpoint, headers: map[string]string{}, timeout: 10 * time.Second, client: &http.Client{}}
	pick := func(name string) string {
		if v := getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
			return v
		}
		return getenv("OTEL_EXPORTER_OTLP_" + name)
	}
	if h := pick("HEADERS"); h != "" {
		for _, kv := range strings.Split(h, ",") {
			k, v, ok := strings.Cut(kv, "=")
			key, kerr := url.QueryUnescape(strings.TrimSpace(k))
			val, verr := url.QueryUnescape(strings.TrimSpace(v))
			if !ok || key == "" || kerr != nil || verr != nil {
				return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_HEADERS: %q is not key=value", kv)
			}
			e.headers[key] = val
		}
	}
	if t := pick("TIMEOUT"); t != "" {
		ms, err := strconv.Atoi(t)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT %q: want milliseconds", t)
		}
		e.timeout = time.Duration(ms) * time.Millisecond
	}
	switch c := pick("COMPRESSION"); c {
	case "", "none":
	case "gzip":
		e.compress = true
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION %q: want gzip or none", c)
	}
	return e, nil
}

// ExportSpans sends the spans in one request, retrying a throttled or
// unavailable endpoint (429, 502, 503, 504) with backoff within the
// timeout.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body, err := proto.Marshal(&tracepb.TracesData{ResourceSpans: resourceSpans(spans)})
	if err != nil {
		return fmt.Errorf("otlp: encode: %w", err)
	}
	if e.compress {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		zw.Close()
		body = b.Bytes()
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	for wait := 100 * time.Millisecond; ; wait *= 2 {
		retry, err := e.post(ctx, body)
		if err == nil || !retry {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
	}
}

// post sends one request; retry says whether another may succeed.
func (e *exporter) post(ctx context.Context, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	if e.compress {
		req.Header.Set("Content-Encoding", "gzip")
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return true, fmt.Errorf("otlp: %w", err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return false, nil
	case resp.StatusCode == 429, resp.StatusCode == 502, resp.StatusCode == 503, resp.StatusCode == 504:
		return true, fmt.Errorf("otlp: %s answered %s", e.url, resp.Status)
	}
	return false, fmt.Errorf("otlp: %s answered %s", e.url, resp.Status)
}

// Shutdown has nothing to release.
func (e *exporter) Shutdown(context.Context) error { return nil }

// resourceSpans groups spans by resource and instrumentation scope.
func resourceSpans(spans []sdktrace.ReadOnlySpan) []*tracepb.ResourceSpans {
	var out []*tracepb.ResourceSpans
	byRes := map[attribute.Distinct]*tracepb.ResourceSpans{}
	byScope := map[attribute.Distinct]map[string]*tracepb.ScopeSpans{}
	for _, s := range spans {
		res := s.Resource()
		key := res.Equivalent()
		rs, ok := byRes[key]
		if !ok {
			rs = &tracepb.ResourceSpans{Resource: &resourcepb.Resource{Attributes: keyValues(res.Attributes())}, SchemaUrl: res.SchemaURL()}
			byRes[key], byScope[key] = rs, map[string]*tracepb.ScopeSpans{}
			out = append(out, rs)
		}
		is := s.InstrumentationScope()
		scopeKey := is.Name + "\x00" + is.Version + "\x00" + is.SchemaURL
		ss, ok := byScope[key][scopeKey]
		if !ok {
			ss = &tracepb.ScopeSpans{Scope: &commonpb.InstrumentationScope{Name: is.Name, Version: is.Version}, SchemaUrl: is.SchemaURL}
			byScope[key][scopeKey] = ss
			rs.ScopeSpans = append(rs.ScopeSpans, ss)
		}
		ss.Spans = append(ss.Spans, span(s))
	}
	return out
}

// span is one span in OTLP's form.
func span(s sdktrace.ReadOnlySpan) *tracepb.Span {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	out := &tracepb.Span{
		TraceId: tid[:], SpanId: sid[:], TraceState: sc.TraceState().String(), Name: s.Name(),
		Kind:              tracepb.Span_SpanKind(s.SpanKind()), // the SDK's kinds are OTLP's numbers
		StartTimeUnixNano: uint64(s.StartTime().UnixNano()), EndTimeUnixNano: uint64(s.EndTime().UnixNano()),
		Attributes: keyValues(s.Attributes()), DroppedAttributesCount: uint32(s.DroppedAttributes()),
		DroppedEventsCount: uint32(s.DroppedEvents()), DroppedLinksCount: uint32(s.DroppedLinks()),
		Flags: uint32(sc.TraceFlags()) | flagHasRemote(s.Parent()),
	}
	if p := s.Parent(); p.IsValid() {
		pid := p.SpanID()
		out.ParentSpanId = pid[:]
	}
	switch st := s.Status(); st.Code {
	case codes.Error:
		out.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: st.Description}
	case codes.Ok:
		out.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	}
	for _, ev := range s.Events() {
		out.Events = append(out.Events, &tracepb.Span_Event{Name: ev.Name, TimeUnixNano: uint64(ev.Time.UnixNano()),
			Attributes: keyValues(ev.Attributes), DroppedAttributesCount: uint32(ev.DroppedAttributeCount)})
	}
	for _, l := range s.Links() {
		ltid, lsid := l.SpanContext.TraceID(), l.SpanContext.SpanID()
		out.Links = append(out.Links, &tracepb.Span_Link{TraceId: ltid[:], SpanId: lsid[:], TraceState: l.SpanContext.TraceState().String(),
			Attributes: keyValues(l.Attributes), DroppedAttributesCount: uint32(l.DroppedAttributeCount)})
	}
	return out
}

// flagHasRemote sets OTLP's span flags that say whether the parent is
// known, and remote.
func flagHasRemote(p trace.SpanContext) uint32 {
	const hasIsRemote, isRemote = 0x100, 0x200
	if !p.IsValid() {
		return hasIsRemote
	}
	if p.IsRemote() {
		return hasIsRemote | isRemote
	}
	return hasIsRemote
}

// keyValues are attributes in OTLP's form.
func keyValues(attrs []attribute.KeyValue) []*commonpb.KeyValue {
	if len(attrs) == 0 {
		return nil
	}
	out := make([]*commonpb.KeyValue, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, &commonpb.KeyValue{Key: string(a.Key), Value: anyValue(a.Value)})
	}
	return out
}

func anyValue(v attribute.Value) *commonpb.AnyValue {
	switch v.Type() {
	case attribute.BOOL:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: v.AsBool()}}
	case attribute.INT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v.AsInt64()}}
	case attribute.FLOAT64:
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: v.AsFloat64()}}
	case attribute.BOOLSLICE:
		return array(v.AsBoolSlice(), func(b bool) *commonpb.AnyValue { return anyValue(attribute.BoolValue(b)) })
	case attribute.INT64SLICE:
		return array(v.AsInt64Slice(), func(n int64) *commonpb.AnyValue { return anyValue(attribute.Int64Value(n)) })
	case attribute.FLOAT64SLICE:
		return array(v.AsFloat64Slice(), func(f float64) *commonpb.AnyValue { return anyValue(attribute.Float64Value(f)) })
	case attribute.STRINGSLICE:
		return array(v.AsStringSlice(), func(s string) *commonpb.AnyValue { return anyValue(attribute.StringValue(s)) })
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v.String()}}
}

func array[T any](vs []T, one func(T) *commonpb.AnyValue) *commonpb.AnyValue {
	arr := &commonpb.ArrayValue{Values: make([]*commonpb.AnyValue, 0, len(vs))}
	for _, v := range vs {
		arr.Values = append(arr.Values, one(v))
	}
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: arr}}
}
