package output

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"github.com/probedbg/probe/fetch"
)

// OTLP sends the trace to an OpenTelemetry collector as spans, so that
// traces from many machines land in the backend users already run: each
// function_graph call is a span (a thread's, or a goroutine's, calls are
// one trace, the call tree its parent/child links), a return probe's call
// is a span from its entry, and an entry probe's hit is an event on the
// call it happened in. Fetch-args (and --args) are the spans' attributes.
// Spans go out in a batch at each flush, by OTLP/HTTP with protobuf
// (otlp://HOST:PORT[/PATH], /v1/traces by default: a collector's port
// 4318).
type OTLP struct {
	export   func(*tracepb.TracesData) error
	failed   error // the first export's failure: no more are tried
	resource *resourcepb.Resource
	scope    *commonpb.InstrumentationScope
	wall     int64 // add to a record's CLOCK_MONOTONIC time for Unix time
	session  [8]byte
	nextSpan uint64
	lanes    map[int64][]*tracepb.Span // open calls, by depth
	pending  []*tracepb.Span
	last     int64 // the latest record's time
}

// IsOTLPTarget reports whether -o names a collector rather than a file
// (otlp+SCHEME:// included, to be refused: not a file name either).
func IsOTLPTarget(out string) bool {
	return strings.HasPrefix(out, "otlp://") || strings.HasPrefix(out, "otlp+")
}

// NewOTLP sends to the collector at target (otlp://HOST:PORT[/PATH]) the
// trace of program.
// wallOffset is what turns the records' CLOCK_MONOTONIC times into Unix
// times (MonoToWall).
func NewOTLP(target, program string, pid int, wallOffset int64) (*OTLP, error) {
	o := &OTLP{wall: wallOffset, lanes: map[int64][]*tracepb.Span{},
		scope: &commonpb.InstrumentationScope{Name: "probe"}}
	rand.Read(o.session[:])
	host, _ := os.Hostname()
	o.resource = &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
		strAttr("service.name", program), intAttr("process.pid", int64(pid)), strAttr("host.name", host),
	}}
	u, err := parseOTLPTarget(target)
	if err != nil {
		return nil, err
	}
	path := u.Path
	if path == "" || path == "/" {
		path = "/v1/traces"
	}
	endpoint := "http://" + u.Host + path
	client := &http.Client{Timeout: exportTimeout}
	o.export = func(data *tracepb.TracesData) error {
		// TracesData is ExportTraceServiceRequest on the wire (OTLP
		// says so): the collector package would bring in gRPC for it.
		body, err := proto.Marshal(data)
		if err != nil {
			return err
		}
		resp, err := client.Post(endpoint, "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("%s: %s", endpoint, resp.Status)
		}
		return nil
	}
	return o, nil
}

// CheckOTLPTarget checks -o otlp://... before anything is traced.
func CheckOTLPTarget(target string) error {
	_, err := parseOTLPTarget(target)
	return err
}

func parseOTLPTarget(target string) (*url.URL, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" || u.Port() == "" || u.Scheme != "otlp" || u.RawQuery != "" {
		return nil, fmt.Errorf("-o %s: want otlp://HOST:PORT[/PATH] (OTLP/HTTP, /v1/traces by default)", target)
	}
	return u, nil
}

// exportTimeout bounds one export: a collector that does not answer
// fails the trace (and tracing stops) rather than stall it.
const exportTimeout = 10 * time.Second

// MonoToWall is what to add to a CLOCK_MONOTONIC time now to get Unix
// time.
func MonoToWall() int64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return time.Now().UnixNano() - ts.Nano()
}

func (o *OTLP) traceID(lane int64) []byte {
	id := make([]byte, 16)
	copy(id, o.session[:])
	binary.BigEndian.PutUint64(id[8:], uint64(lane))
	return id
}

func (o *OTLP) spanID() []byte {
	o.nextSpan++
	id := make([]byte, 8)
	binary.BigEndian.PutUint64(id, o.nextSpan^binary.BigEndian.Uint64(o.session[:])|1<<63)
	return id
}

func (o *OTLP) unix(t int64) uint64 { return uint64(t + o.wall) }

func (o *OTLP) Write(r *Record) error {
	o.last = max(o.last, r.Time)
	stack := o.lanes[r.Lane]
	switch r.Kind {
	case KindEntry:
		stack = o.endFrom(stack, r.Depth, r.Time, "return lost")
		s := &tracepb.Span{TraceId: o.traceID(r.Lane), SpanId: o.spanID(), Name: r.Func,
			Kind: tracepb.Span_SPAN_KIND_INTERNAL, StartTimeUnixNano: o.unix(r.Time), Attributes: threadAttrs(r)}
		if len(stack) > 0 {
			s.ParentSpanId = stack[len(stack)-1].SpanId
		}
		s.Attributes = append(s.Attributes, fieldAttrs("arg.", r.Fields)...)
		o.lanes[r.Lane] = append(stack, s)
	case KindReturn, KindLost:
		if r.Depth >= len(stack) {
			return nil // entered before the trace began
		}
		s := stack[r.Depth]
		o.endFrom(stack, r.Depth+1, r.Time, "return lost")
		s.EndTimeUnixNano = o.unix(r.Time)
		s.Attributes = append(s.Attributes, fieldAttrs("", r.Fields)...) // retval
		if r.Kind == KindLost {
			s.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "return lost"}
		}
		o.pending = append(o.pending, s)
		if r.Depth == 0 {
			delete(o.lanes, r.Lane)
		} else {
			o.lanes[r.Lane] = stack[:r.Depth]
		}
	case KindProbe:
		attrs := append(threadAttrs(r), strAttr("probe.location", r.Where))
		attrs = append(attrs, fieldAttrs("", r.Fields)...)
		if len(r.Stack) > 0 {
			attrs = append(attrs, strAttr("probe.stack", strings.Join(r.Stack, "\n")))
		}
		var parent *tracepb.Span
		if len(stack) > 0 {
			parent = stack[len(stack)-1]
		}
		if d, ok := returnDuration(r); ok {
			// A return probe: its call, as a span.
			s := &tracepb.Span{TraceId: o.traceID(r.Lane), SpanId: o.spanID(), Name: r.Event,
				Kind: tracepb.Span_SPAN_KIND_INTERNAL, StartTimeUnixNano: o.unix(r.Time - d), EndTimeUnixNano: o.unix(r.Time), Attributes: attrs}
			if parent != nil {
				s.ParentSpanId = parent.SpanId
			}
			o.pending = append(o.pending, s)
			break
		}
		if parent != nil {
			parent.Events = append(parent.Events, &tracepb.Span_Event{TimeUnixNano: o.unix(r.Time), Name: r.Event, Attributes: attrs})
			break
		}
		// A hit outside any traced call: a span of no length.
		o.pending = append(o.pending, &tracepb.Span{TraceId: o.traceID(r.Lane), SpanId: o.spanID(), Name: r.Event,
			Kind: tracepb.Span_SPAN_KIND_INTERNAL, StartTimeUnixNano: o.unix(r.Time), EndTimeUnixNano: o.unix(r.Time), Attributes: attrs})
	}
	return nil
}

// endFrom ends the calls of stack at depth and deeper, which will never
// return (their records were lost), at time end; it returns the rest.
func (o *OTLP) endFrom(stack []*tracepb.Span, depth int, end int64, why string) []*tracepb.Span {
	for i := len(stack) - 1; i >= depth; i-- {
		s := stack[i]
		s.EndTimeUnixNano = o.unix(end)
		s.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: why}
		o.pending = append(o.pending, s)
	}
	return stack[:min(depth, len(stack))]
}

func threadAttrs(r *Record) []*commonpb.KeyValue {
	a := []*commonpb.KeyValue{intAttr("thread.id", int64(r.Tid)), strAttr("thread.name", r.Comm)}
	if r.Goroutine != 0 {
		a = append(a, intAttr("go.goroutine.id", r.Goroutine))
	}
	return a
}

// fieldAttrs are fields as attributes: integers as integers (x types,
// chars and strings as their text, an unsigned past int64's range as its
// decimal text), a fault as no value.
func fieldAttrs(prefix string, fields []fetch.Field) []*commonpb.KeyValue {
	var a []*commonpb.KeyValue
	for _, f := range fields {
		switch v := scalarValue(f.Value); x := v.(type) {
		case nil:
		case uint64:
			if x > math.MaxInt64 {
				// OTLP's integers are signed: past them, the
				// number as text rather than a wrapped one.
				a = append(a, strAttr(prefix+f.Name, strconv.FormatUint(x, 10)))
				break
			}
			a = append(a, intAttr(prefix+f.Name, int64(x)))
		case int64:
			a = append(a, intAttr(prefix+f.Name, x))
		case string:
			a = append(a, strAttr(prefix+f.Name, x))
		case bool:
			a = append(a, &commonpb.KeyValue{Key: prefix + f.Name, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: x}}})
		case json.Number:
			if n, err := x.Int64(); err == nil {
				a = append(a, intAttr(prefix+f.Name, n))
				break
			}
			a = append(a, strAttr(prefix+f.Name, x.String()))
		default:
			a = append(a, strAttr(prefix+f.Name, f.Value.String()))
		}
	}
	return a
}

func strAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func intAttr(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

// Comment: a note (events lost...) goes to standard error; spans have no
// place for it.
func (o *OTLP) Comment(s string) error {
	fmt.Fprintf(os.Stderr, "probe: %s\n", s)
	return nil
}

// Flush sends the spans ended since the last flush.
func (o *OTLP) Flush() error {
	if len(o.pending) == 0 {
		return nil
	}
	req := &tracepb.TracesData{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource:   o.resource,
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: o.scope, Spans: o.pending}},
	}}}
	o.pending = nil
	if o.failed != nil {
		return o.failed // (not a second wait for a collector that did not answer)
	}
	if err := o.export(req); err != nil {
		o.failed = fmt.Errorf("%w: %w", ErrCollector, err)
		return o.failed
	}
	return nil
}

// ErrCollector is what a failed export's error wraps: the collector
// refused the spans or did not answer. It ends the trace, as a reader
// gone away does, not the program's run.
var ErrCollector = errors.New("otlp export")

// Finish ends the calls still open at the last time seen, sends what is
// left and closes the connection.
func (o *OTLP) Finish() error {
	for lane, stack := range o.lanes {
		o.endFrom(stack, 0, o.last, "unfinished")
		delete(o.lanes, lane)
	}
	return o.Flush()
}

// Failing is a Writer whose every write fails with err: a destination
// found unusable after the checks, reported by the first write.
func Failing(err error) Writer { return failedWriter{err} }

type failedWriter struct{ err error }

func (f failedWriter) Write(*Record) error  { return f.err }
func (f failedWriter) Comment(string) error { return f.err }
func (f failedWriter) Flush() error         { return f.err }
func (f failedWriter) Finish() error        { return f.err }
