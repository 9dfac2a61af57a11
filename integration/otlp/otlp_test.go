// Package otlp tests probe's OpenTelemetry export against the collector's
// own OTLP receiver, started on loopback: what arrives is what a
// collector would take in. (Its own package: the collector's modules stay
// out of the integration suite's build, and of the arm64 guest's.)
package otlp

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// freePort is a loopback address no one listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// receiver starts the collector's OTLP receiver, HTTP only.
func receiver(t *testing.T) (httpAddr string, sink *consumertest.TracesSink) {
	t.Helper()
	httpAddr = freePort(t)
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = httpAddr
	sink = new(consumertest.TracesSink)
	r, err := f.CreateTraces(context.Background(), receivertest.NewNopSettings(f.Type()), cfg, sink)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Shutdown(context.Background()) })
	return httpAddr, sink
}

// build makes the probe binary (or takes $PROBE_BIN) and the tracee.
func build(t *testing.T) (probe, tracee string) {
	t.Helper()
	dir := t.TempDir()
	probe = os.Getenv("PROBE_BIN")
	if probe == "" {
		probe = filepath.Join(dir, "probe")
		if out, err := exec.Command("go", "build", "-o", probe, "../../cmd/probe").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
	}
	tracee = filepath.Join(dir, "args")
	if out, err := exec.Command("gcc", "-O0", "-g", "-o", tracee, "../testdata/tracers/args.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return probe, tracee
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("%s %q: %v\nstdout: %s\nstderr: %s", name, args, err, out, stderr.String())
	}
	return string(out)
}

// spans waits for n spans at the receiver and returns them by name.
func spans(t *testing.T, sink *consumertest.TracesSink, n int) (map[string][]ptrace.Span, pcommon.Map) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); sink.SpanCount() < n && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	byName := map[string][]ptrace.Span{}
	var resource pcommon.Map
	for _, td := range sink.AllTraces() {
		for _, rs := range td.ResourceSpans().All() {
			resource = rs.Resource().Attributes()
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					byName[s.Name()] = append(byName[s.Name()], s)
				}
			}
		}
	}
	if sink.SpanCount() != n {
		t.Fatalf("%d spans at the receiver, want %d: %v", sink.SpanCount(), n, slices.Sorted(func(yield func(string) bool) {
			for k := range byName {
				if !yield(k) {
					return
				}
			}
		}))
	}
	return byName, resource
}

func attr(s ptrace.Span, key string) string {
	v, ok := s.Attributes().Get(key)
	if !ok {
		return "<none>"
	}
	return v.AsString()
}

// checkCalls checks the spans of one run of args.c under function_graph
// --args: one per call, one trace, each call a child of main's span,
// times in order, arguments and results as attributes.
func checkCalls(t *testing.T, byName map[string][]ptrace.Span, resource pcommon.Map, tracee string) {
	t.Helper()
	main := byName["main"]
	if len(main) != 1 {
		t.Fatalf("%d main spans, want 1", len(main))
	}
	m := main[0]
	for _, name := range []string{"add", "scale", "greet", "many", "bypair", "bybig", "dist", "next", "nothing", "pick"} {
		ss := byName[name]
		if len(ss) != 1 {
			t.Errorf("%d spans of %s, want 1", len(ss), name)
			continue
		}
		s := ss[0]
		if s.TraceID() != m.TraceID() || s.ParentSpanID() != m.SpanID() || s.SpanID() == m.SpanID() {
			t.Errorf("%s: trace %v parent %v, want main's trace %v and main (%v) as parent", name, s.TraceID(), s.ParentSpanID(), m.TraceID(), m.SpanID())
		}
		if s.StartTimestamp() < m.StartTimestamp() || s.EndTimestamp() > m.EndTimestamp() || s.EndTimestamp() < s.StartTimestamp() {
			t.Errorf("%s: %v..%v, not within main's %v..%v", name, s.StartTimestamp(), s.EndTimestamp(), m.StartTimestamp(), m.EndTimestamp())
		}
	}
	if m.ParentSpanID() != pcommon.NewSpanIDEmpty() || attr(m, "arg.argc") != "1" || attr(m, "retval") != "0" {
		t.Errorf("main: parent %v, argc %s, retval %s; want a root span, argc 1 and retval 0", m.ParentSpanID(), attr(m, "arg.argc"), attr(m, "retval"))
	}
	for _, c := range []struct{ span, key, want string }{
		{"add", "arg.a", "2"}, {"add", "arg.b", "3"}, {"add", "retval", "5"},
		{"greet", "arg.name", "world"}, {"many", "arg.i", "9"}, {"many", "retval", "29"},
		{"next", "arg.c", "RED"}, {"next", "retval", "GREEN"},
	} {
		if ss := byName[c.span]; len(ss) == 1 && attr(ss[0], c.key) != c.want {
			t.Errorf("%s %s = %s, want %s", c.span, c.key, attr(ss[0], c.key), c.want)
		}
	}
	if v, _ := resource.Get("service.name"); v.AsString() != filepath.Base(tracee) {
		t.Errorf("service.name %q, want %q", v.AsString(), filepath.Base(tracee))
	}
	if s := byName["add"]; len(s) == 1 && time.Since(s[0].StartTimestamp().AsTime()).Abs() > time.Hour {
		t.Errorf("add's span starts at %v: not Unix time", s[0].StartTimestamp().AsTime())
	}
}

// TestOTLPExport: function_graph's calls with --args arrive at the
// collector's receiver as spans, over OTLP/HTTP, live and from a
// recording.
func TestOTLPExport(t *testing.T) {
	probe, tracee := build(t)
	httpAddr, sink := receiver(t)
	const calls = 11 // main and its ten callees
	for _, target := range []string{"otlp://" + httpAddr, "otlp://" + httpAddr + "/v1/traces"} {
		sink.Reset()
		out := run(t, probe, "run", "-o", target, "--tracer", "function_graph", "--args", "--", tracee)
		if out != "227 no\n" {
			t.Errorf("%s: the program printed %q", target, out)
		}
		byName, resource := spans(t, sink, calls)
		checkCalls(t, byName, resource, tracee)
	}

	sink.Reset()
	rec := filepath.Join(t.TempDir(), "trace.bin")
	run(t, probe, "record", "-o", rec, "--tracer", "function_graph", "--args", "--", tracee)
	run(t, probe, "report", "--format", "otlp", "-o", "otlp://"+httpAddr, rec)
	byName, resource := spans(t, sink, calls)
	checkCalls(t, byName, resource, tracee)
}

// TestOTLPProbes: a return probe's call is a span from its entry, an
// entry probe's hit an event on the call it happened in.
func TestOTLPProbes(t *testing.T) {
	probe, tracee := build(t)
	httpAddr, sink := receiver(t)
	run(t, probe, "run", "-o", "otlp://"+httpAddr, "--tracer", "function_graph", "--filter", "main",
		"r:add sum=$retval:s32", "p:greet name=+0(%di):string", "--", tracee)
	byName, _ := spans(t, sink, 2)
	if r := byName["r_add_0"]; len(r) != 1 || attr(r[0], "sum") != "5" || r[0].ParentSpanID() != byName["main"][0].SpanID() {
		t.Errorf("r_add_0: %d spans, sum %v; want one, sum 5, under main", len(r), r)
	}
	m := byName["main"][0]
	var names []string
	for _, e := range m.Events().All() {
		if v, _ := e.Attributes().Get("name"); e.Name() == "p_greet_0" {
			names = append(names, v.AsString())
		}
	}
	if strings.Join(names, ",") != "world" {
		t.Errorf("main's events: p_greet_0 with names %q, want one with \"world\"", names)
	}
}

// TestOTLPBadTarget: a malformed collector address is refused before
// anything runs.
func TestOTLPBadTarget(t *testing.T) {
	probe, tracee := build(t)
	for _, args := range [][]string{
		{"run", "-o", "otlp://nohost", "--tracer", "function_graph", "--", tracee},
		{"run", "-o", "otlp+http://127.0.0.1:4318", "--tracer", "function_graph", "--", tracee},
		{"run", "-o", "otlp://127.0.0.1:4317", "--format", "json", "--tracer", "function_graph", "--", tracee},
		{"run", "--format", "otlp", "--tracer", "function_graph", "--", tracee},
		{"record", "-o", "otlp://127.0.0.1:4317", "--tracer", "function_graph", "--", tracee},
	} {
		cmd := exec.Command(probe, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		ee, _ := err.(*exec.ExitError)
		if ee == nil || ee.ExitCode() != 2 || len(out) != 0 || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("probe %q: want exit 2, one line and nothing run; got %v, stdout %q, stderr %q", args, err, out, stderr.String())
		}
	}
}

// TestOTLPCollectorGone: a collector that cannot be reached ends the
// trace, as a reader gone away does, and not the run: the error said
// once, the program's own exit status kept.
func TestOTLPCollectorGone(t *testing.T) {
	probe, _ := build(t)
	dir := t.TempDir()
	src, exe := filepath.Join(dir, "five.c"), filepath.Join(dir, "five")
	os.WriteFile(src, []byte("int add(int a, int b) { return a + b; }\nint main(void) { return add(2, 3); }\n"), 0o644)
	if out, err := exec.Command("gcc", "-O0", "-g", "-o", exe, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd := exec.Command(probe, "run", "-o", "otlp://"+freePort(t), "--tracer", "function_graph", "--", exe)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	ee, _ := err.(*exec.ExitError)
	if ee == nil || ee.ExitCode() != 5 || strings.Count(stderr.String(), "\n") != 1 ||
		!strings.HasPrefix(stderr.String(), "probe: otlp export: ") || !strings.Contains(stderr.String(), "connection refused") {
		t.Errorf("probe run to a collector no one listens for: want exit 5 (the program's) and one line saying the export failed; got %v, stderr %q", err, stderr.String())
	}
}
