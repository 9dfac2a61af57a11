package integration

import (
	"os"
	"path/filepath"
	"regexp"
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
