package integration

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// function_graph with probe events beside it: each event is a comment
// among the calls of its own thread, at their depth, and the switch marker
// comes only when the thread changes (output.Graph).

var (
	switchMarkRE  = regexp.MustCompile(`^ \d+\) +(\S+) +=> +(\S+) *$`)
	graphCallLine = regexp.MustCompile(`^ \d+\) +(\S+) +\|[^|]*\|  ( *)(.*)$`)
)

func TestGraphProbeComments(t *testing.T) {
	// One thread: sqlite3 from Debian, its library's API traced and
	// libc's malloc probed inside it. Not one marker.
	dir := t.TempDir()
	sql := strings.Repeat("create table if not exists t(a, b); insert into t values(1, 'x'); select count(*) from t;\n", 200)
	trace := filepath.Join(dir, "sqlite.txt")
	r := runCmdStdin(t, nil, []byte(sql), probeBin, "run", "--tracer", "function_graph", "--filter", "libsqlite3:sqlite3_*", "-o", trace, "p:libc:malloc", "--", "/usr/bin/sqlite3", ":memory:")
	if r.code != 0 {
		t.Fatalf("probe run sqlite3: %v", r)
	}
	b, _ := os.ReadFile(trace)
	text := string(b)
	if n := strings.Count(text, "=>"); n != 0 || !strings.Contains(text, "/* p_malloc_0: (") {
		t.Errorf("single-threaded sqlite3: %d switch markers (want 0), or no malloc comment:\n%s", n, limit(text))
	}
	checkComments(t, text, "p_malloc_0", false) // the shell mallocs outside the API too

	// Four threads at once: markers name two different threads, and each
	// p_twig_0 comment sits inside its thread's step() call.
	trace = filepath.Join(dir, "threads.txt")
	if r := probe(t, "run", "--tracer", "function_graph", "-o", trace, "p:twig", "--", tracerBin(t, "threads"), "20"); r.code != 0 {
		t.Fatalf("probe run threads: %v", r)
	}
	b, _ = os.ReadFile(trace)
	checkComments(t, string(b), "p_twig_0", true)
}

// checkComments checks that every switch marker changes thread and that
// each comment for event is at the depth of the calls open on its lane
// (inside one, if inside).
func checkComments(t *testing.T, text, event string, inside bool) {
	t.Helper()
	depth := map[string]int{} // open calls per proc column
	comments := 0
	for _, line := range strings.Split(text, "\n") {
		if m := switchMarkRE.FindStringSubmatch(line); m != nil {
			if m[1] == m[2] {
				t.Errorf("a switch marker from %s to itself: %q", m[1], line)
			}
			continue
		}
		m := graphCallLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		proc, indent, rest := m[1], len(m[2])/2, m[3]
		switch {
		case strings.HasPrefix(rest, "/* "+event+":"):
			comments++
			if indent != depth[proc] || inside && depth[proc] == 0 {
				t.Errorf("%q: at depth %d, want inside the %d calls open on %s", line, indent, depth[proc], proc)
			}
		case strings.HasSuffix(rest, "() {"):
			depth[proc] = indent + 1
		case strings.HasPrefix(rest, "}"):
			depth[proc] = indent
		}
	}
	if comments == 0 {
		t.Errorf("no %s comment in\n%s", event, limit(text))
	}
}

// TestProfileAndStackFormats: the profile's columns agree for a
// recursion (Avg = Time/Hit); pprof shows by default what it has (time
// of calls, or probe hits when it has only those); pprof and folded alike
// need call stacks, and are refused without any.
func TestProfileAndStackFormats(t *testing.T) {
	exe := tracerBin(t, "shape_O0_pie")
	dir := t.TempDir()
	prof := filepath.Join(dir, "profile.txt")
	if r := probe(t, "run", "--tracer", "profile", "-o", prof, "--", exe, "2", "20", "0"); r.code != 0 {
		t.Fatalf("probe --tracer profile: %v", r)
	}
	b, _ := os.ReadFile(prof)
	m := regexp.MustCompile(`(?m)^  recurse +(\d+) +([\d.]+) us +([\d.]+) us`).FindStringSubmatch(string(b))
	if m == nil {
		t.Fatalf("no recurse row in\n%s", b)
	}
	hit, _ := strconv.ParseFloat(m[1], 64)
	tm, _ := strconv.ParseFloat(m[2], 64)
	avg, _ := strconv.ParseFloat(m[3], 64)
	if hit != 21 || math.Abs(avg-tm/hit) > 0.002 {
		t.Errorf("recurse: Hit %v, Time %v us, Avg %v us: want 21 hits and Avg = Time/Hit (%.3f)", hit, tm, avg, tm/hit)
	}

	// pprof of probe hits with stacks only: go tool pprof -top shows them.
	pb := filepath.Join(dir, "hits.pb")
	if r := probe(t, "run", "--format", "pprof", "-o", pb, "p:leaf => stacktrace", "--", exe, "2", "0", "0"); r.code != 0 {
		t.Fatalf("probe --format pprof: %v", r)
	}
	top, err := exec.Command("go", "tool", "pprof", "-top", pb).CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^ +12 +\d+(\.\d+)?% .* leaf$`).Match(top) {
		t.Errorf("go tool pprof -top of 12 leaf hits: %v\n%s", err, top)
	}
	// With function_graph: time by default, a function's flat time not 0.
	pb = filepath.Join(dir, "graph.pb")
	if r := probe(t, "run", "--tracer", "function_graph", "--format", "pprof", "-o", pb, "--", exe, "2", "3", "0"); r.code != 0 {
		t.Fatalf("probe --format pprof: %v", r)
	}
	top, err = exec.Command("go", "tool", "pprof", "-top", pb).CombinedOutput()
	if err != nil || !strings.Contains(string(top), "Type: time") || !regexp.MustCompile(`(?m)^ +[1-9][\d.]*[mun]?s .* main$`).Match(top) {
		t.Errorf("go tool pprof -top of a function_graph profile: %v\n%s", err, top)
	}
	// Folded stacks of probe hits: counts.
	folded := filepath.Join(dir, "hits.folded")
	if r := probe(t, "run", "--format", "folded", "-o", folded, "p:leaf => stacktrace", "--", exe, "2", "0", "0"); r.code != 0 {
		t.Fatalf("probe --format folded: %v", r)
	}
	if b, _ := os.ReadFile(folded); !regexp.MustCompile(`(?m);mid;leaf 12$`).Match(b) {
		t.Errorf("folded probe stacks: want a ...;mid;leaf 12 line, got\n%s", b)
	}
	// Nothing to show: both refused alike.
	for _, f := range []string{"pprof", "folded"} {
		r := probe(t, "run", "--format", f, "-o", filepath.Join(dir, "x"), "p:leaf", "--", exe, "1", "0", "0")
		want := "probe: --format " + f + ": no call stacks to show: give --tracer function_graph, or a probe with => stacktrace\n"
		if r.code != 2 || r.stderr != want {
			t.Errorf("--format %s with no stacks: want exit 2 and %q, got %v", f, want, r)
		}
	}
}
