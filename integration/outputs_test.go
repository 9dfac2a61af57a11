package integration

// The output formats (--format json, chrome, pprof, folded) and probe
// record / probe report, on the tracer tracees: every check counts what
// the program's known call shape says, or compares two views of one
// recorded trace.

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"io"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	pprofile "github.com/google/pprof/profile"
	"golang.org/x/sys/unix"
)

// jsonEvent is what a line of --format json holds.
type jsonEvent struct {
	Time     int64          `json:"time"`
	Pid      int            `json:"pid"`
	Tid      int            `json:"tid"`
	Comm     string         `json:"comm"`
	Event    string         `json:"event"`
	Location string         `json:"location"`
	Func     string         `json:"func"`
	Depth    *int           `json:"depth"`
	Duration *int64         `json:"duration"`
	Fields   map[string]any `json:"fields"`
	Comment  *string        `json:"comment"`
}

// readJSONLines parses every line of a JSON lines file; a line that does
// not parse fails the test.
func readJSONLines(t *testing.T, path string) []jsonEvent {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var evs []jsonEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var e jsonEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("%s:%d: %v: %s", path, n, err, sc.Text())
		}
		evs = append(evs, e)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return evs
}

func mustProbe(t *testing.T, args ...string) result {
	t.Helper()
	r := probe(t, args...)
	if r.code != 0 {
		t.Fatalf("probe %q: %v", args, r)
	}
	return r
}

// textEvents returns the event lines of a text trace (not comments).
func textEvents(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines
}

// TestOutputJSONProbes: the JSON lines of p:/r: probes parse, are as many
// as the text trace's events and as the program's calls, and carry typed
// fields and return durations.
func TestOutputJSONProbes(t *testing.T) {
	exe := tracerBin(t, "shape_O0_pie")
	dir := t.TempDir()
	const n = 3 // shape 3: 3 top, 9 mid, 18 leaf calls
	specs := []string{"p:leaf x=%di:s32", "r:leaf $retval:u32"}
	text, js := filepath.Join(dir, "t.txt"), filepath.Join(dir, "t.json")
	mustProbe(t, append(append([]string{"run", "-o", text}, specs...), "--", exe, strconv.Itoa(n), "0", "0")...)
	mustProbe(t, append(append([]string{"run", "--format", "json", "-o", js}, specs...), "--", exe, strconv.Itoa(n), "0", "0")...)

	textLines := textEvents(t, text)
	evs := readJSONLines(t, js)
	// The trace ends with how each probe was served (as -v says).
	var paths []string
	for len(evs) > 0 && evs[len(evs)-1].Comment != nil {
		paths = append([]string{*evs[len(evs)-1].Comment}, paths...)
		evs = evs[:len(evs)-1]
	}
	if want := []string{"probe/p_leaf_0: in-process", "probe/r_leaf_0: in-process"}; !slices.Equal(paths, want) {
		t.Errorf("closing comments %q, want %q", paths, want)
	}
	if len(evs) != len(textLines) {
		t.Fatalf("%d JSON lines, %d text events", len(evs), len(textLines))
	}
	byEvent := map[string]int{}
	for i, e := range evs {
		byEvent[e.Event]++
		if e.Comm != "shape_O0_pie" || e.Tid != e.Pid || e.Time <= 0 {
			t.Errorf("line %d: %+v", i+1, e)
		}
		switch e.Event {
		case "p_leaf_0":
			if _, ok := e.Fields["x"].(float64); !ok || !regexp.MustCompile(`^leaf\+0x0/0x[0-9a-f]+$`).MatchString(e.Location) {
				t.Errorf("line %d: x=%v (%T) at %s, want a number at leaf+0x0", i+1, e.Fields["x"], e.Fields["x"], e.Location)
			}
		case "r_leaf_0":
			// leaf(x) returns 2x+1: the entry just before gave x.
			x := evs[i-1].Fields["x"].(float64)
			if e.Fields["arg1"] != 2*x+1 || e.Duration == nil || *e.Duration <= 0 || !strings.HasSuffix(e.Location, "<- leaf") {
				t.Errorf("line %d: %+v after x=%v, want arg1=%v and a duration", i+1, e, x, 2*x+1)
			}
		}
	}
	if want := map[string]int{"p_leaf_0": 6 * n, "r_leaf_0": 6 * n}; !maps.Equal(byEvent, want) {
		t.Errorf("events %v, want %v", byEvent, want)
	}
}

// TestOutputJSONDwarfFields: a field named by DWARF is a JSON number when
// its type is one, as the register fields are.
func TestOutputJSONDwarfFields(t *testing.T) {
	exe := tracerBin(t, "shape_O0_pie")
	js := filepath.Join(t.TempDir(), "t.json")
	mustProbe(t, "run", "--format", "json", "-o", js, "p:leaf x", "--", exe, "1", "0", "0")
	evs := readJSONLines(t, js)
	// shape 1: leaf(x) is called with 0, 1, 1, 2, 2, 3 (mid(x) calls
	// leaf(x) and leaf(x+1), for x = 0, 1, 2).
	var got []any
	for _, e := range evs {
		if e.Event == "p_leaf_0" {
			got = append(got, e.Fields["x"])
		}
	}
	if want := []any{0.0, 1.0, 1.0, 2.0, 2.0, 3.0}; !reflect.DeepEqual(got, want) {
		t.Errorf("x of each p_leaf_0 line: %v, want the numbers %v", got, want)
	}
}

// graphCalls counts the calls of a function_graph text trace by function:
// "f();" leaves and "f() {" openings.
func graphCalls(lines []string) map[string]int {
	calls := map[string]int{}
	re := regexp.MustCompile(`\|\s+([A-Za-z_][A-Za-z0-9_.]*)\(\)( \{|;)$`)
	for _, l := range lines {
		if m := re.FindStringSubmatch(l); m != nil {
			calls[m[1]]++
		}
	}
	return calls
}

// TestOutputJSONGraph: function_graph in JSON has an entry and an exit per
// call the text trace draws, on four threads at once.
func TestOutputJSONGraph(t *testing.T) {
	exe := tracerBin(t, "threads")
	dir := t.TempDir()
	const n = 5
	text, js := filepath.Join(dir, "g.txt"), filepath.Join(dir, "g.json")
	mustProbe(t, "run", "--tracer", "function_graph", "-o", text, "--", exe, strconv.Itoa(n))
	mustProbe(t, "run", "--tracer", "function_graph", "--format", "json", "-o", js, "--", exe, strconv.Itoa(n))

	want := map[string]int{"main": 1, "thread": 4, "worker": 4, "step": 4 * n, "twig": 8 * n}
	if got := graphCalls(textEvents(t, text)); !maps.Equal(got, want) {
		t.Fatalf("text trace calls %v, want %v", got, want)
	}
	entries, exits := map[string]int{}, map[string]int{}
	tids := map[int]bool{}
	for _, e := range readJSONLines(t, js) {
		switch e.Event {
		case "func_entry":
			entries[e.Func]++
		case "func_exit":
			exits[e.Func]++
			if e.Duration == nil || *e.Duration < 0 {
				t.Errorf("exit without a duration: %+v", e)
			}
		default:
			t.Errorf("unexpected event %+v", e)
		}
		tids[e.Tid] = true
	}
	if !maps.Equal(entries, want) || !maps.Equal(exits, want) {
		t.Errorf("JSON entries %v, exits %v, want %v", entries, exits, want)
	}
	if len(tids) != 5 {
		t.Errorf("%d threads, want 5", len(tids))
	}
}

type chromeTrace struct {
	TraceEvents []struct {
		Name string         `json:"name"`
		Ph   string         `json:"ph"`
		Ts   float64        `json:"ts"`
		Dur  float64        `json:"dur"`
		Pid  int            `json:"pid"`
		Tid  int            `json:"tid"`
		Args map[string]any `json:"args"`
	} `json:"traceEvents"`
	OtherData struct {
		Comments []string `json:"comments"`
	} `json:"otherData"`
}

// TestOutputChrome: the Chrome trace parses, has a named track per thread,
// one complete event per call, nested on each track (each call ends
// within its caller), and the probe's hits as instants on their thread.
func TestOutputChrome(t *testing.T) {
	exe := tracerBin(t, "threads")
	out := filepath.Join(t.TempDir(), "c.json")
	const n = 4
	mustProbe(t, "run", "--tracer", "function_graph", "--format", "chrome", "-o", out, "p:step x=%di:s64", "--", exe, strconv.Itoa(n))
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var tr chromeTrace
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, data)
	}
	type span struct{ start, end float64 }
	names := map[int]string{}
	calls := map[string]int{}
	spans := map[int][]span{}
	steps := map[int]int{} // step calls per thread
	hits := map[int]int{}  // p:step hits per thread
	for _, e := range tr.TraceEvents {
		switch e.Ph {
		case "M":
			names[e.Tid] = e.Args["name"].(string)
		case "X":
			calls[e.Name]++
			spans[e.Tid] = append(spans[e.Tid], span{e.Ts, e.Ts + e.Dur})
			if e.Name == "step" {
				steps[e.Tid]++
			}
		case "i":
			if _, ok := e.Args["x"].(float64); e.Name != "p_step_0" || !ok {
				t.Errorf("instant %+v", e)
			}
			hits[e.Tid]++
		default:
			t.Errorf("unexpected event %+v", e)
		}
	}
	if want := map[string]int{"main": 1, "thread": 4, "worker": 4, "step": 4 * n, "twig": 8 * n}; !maps.Equal(calls, want) {
		t.Errorf("calls %v, want %v", calls, want)
	}
	if len(names) != 5 {
		t.Errorf("tracks %v, want 5 threads", names)
	}
	for tid, name := range names {
		if name != "threads-"+strconv.Itoa(tid) {
			t.Errorf("track %d named %q", tid, name)
		}
	}
	if !maps.Equal(steps, hits) {
		t.Errorf("step calls per thread %v, probe hits %v", steps, hits)
	}
	// Begin and end balance per thread: sorted by start (the longer first
	// at equal starts), every span ends before the innermost open one does.
	const slack = 0.0015 // µs: the 3 decimals of a ns
	for tid, ss := range spans {
		sort.Slice(ss, func(i, j int) bool {
			if ss[i].start != ss[j].start {
				return ss[i].start < ss[j].start
			}
			return ss[i].end > ss[j].end
		})
		var open []span
		for _, s := range ss {
			for len(open) > 0 && open[len(open)-1].end <= s.start+slack {
				open = open[:len(open)-1]
			}
			if len(open) > 0 && s.end > open[len(open)-1].end+slack {
				t.Errorf("thread %d: call %v overlaps its caller %v", tid, s, open[len(open)-1])
			}
			open = append(open, s)
		}
	}
}

// TestOutputChromeMatchesRecords: from one recording, the Chrome trace
// has exactly one complete event per call the JSON lines report, with
// the same thread, start and duration (to the nanosecond).
func TestOutputChromeMatchesRecords(t *testing.T) {
	exe := tracerBin(t, "threads")
	dir := t.TempDir()
	rec, js, ch := filepath.Join(dir, "t.bin"), filepath.Join(dir, "t.json"), filepath.Join(dir, "t.chrome")
	mustProbe(t, "record", "-o", rec, "--tracer", "function_graph", "--", exe, "3")
	mustProbe(t, "report", "--format", "json", "-o", js, rec)
	mustProbe(t, "report", "--format", "chrome", "-o", ch, rec)
	type call struct {
		tid        int
		fn         string
		start, dur int64 // ns
	}
	var want, got []call
	for _, e := range readJSONLines(t, js) {
		if e.Event == "func_exit" {
			want = append(want, call{e.Tid, e.Func, e.Time - *e.Duration, *e.Duration})
		}
	}
	data, err := os.ReadFile(ch)
	if err != nil {
		t.Fatal(err)
	}
	var tr chromeTrace
	if err := json.Unmarshal(data, &tr); err != nil {
		t.Fatal(err)
	}
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" {
			got = append(got, call{e.Tid, e.Name, int64(math.Round(e.Ts * 1e3)), int64(math.Round(e.Dur * 1e3))})
		}
	}
	less := func(a, b call) int {
		return cmp.Or(cmp.Compare(a.tid, b.tid), cmp.Compare(a.start, b.start), cmp.Compare(a.fn, b.fn))
	}
	slices.SortFunc(want, less)
	slices.SortFunc(got, less)
	if len(want) != 1+4*(1+1+3+2*3) || !slices.Equal(got, want) {
		t.Errorf("chrome calls\n%v\nJSON calls\n%v", got, want)
	}
}

// TestOutputPprof: go tool pprof -top lists the traced functions, with
// the number of calls the program makes; the profile's time adds up to
// the recording's, and a leaf's to the durations of its calls.
func TestOutputPprof(t *testing.T) {
	exe := tracerBin(t, "shape_O0_pie")
	dir := t.TempDir()
	prof, rec, js := filepath.Join(dir, "shape.pb"), filepath.Join(dir, "t.bin"), filepath.Join(dir, "t.json")
	const n, r = 2, 3
	mustProbe(t, "run", "--tracer", "function_graph", "--format", "pprof", "-o", prof, "--", exe, strconv.Itoa(n), strconv.Itoa(r), "0")
	top := func(prof, index string) map[string]string {
		out, err := exec.Command("go", "tool", "pprof", "-sample_index="+index, "-top", prof).CombinedOutput()
		if err != nil {
			t.Fatalf("go tool pprof: %v\n%s", err, out)
		}
		// flat flat% sum% cum cum% name
		flat := map[string]string{}
		for _, l := range strings.Split(string(out), "\n") {
			if f := strings.Fields(l); len(f) == 6 && strings.HasSuffix(f[1], "%") {
				flat[f[5]] = f[0]
			}
		}
		return flat
	}
	if got, want := top(prof, "calls"), map[string]string{"main": "1", "top": "2", "mid": "6", "leaf": "12", "recurse": "4"}; !maps.Equal(got, want) {
		t.Errorf("pprof -top calls: %v, want %v", got, want)
	}
	for fn, flat := range top(prof, "time") {
		if !regexp.MustCompile(`^[0-9.]+(ns|us|ms|s)$`).MatchString(flat) {
			t.Errorf("%s: flat time %q", fn, flat)
		}
	}

	// Exact times, from one recording.
	mustProbe(t, "record", "-o", rec, "--tracer", "function_graph", "--", exe, strconv.Itoa(n), strconv.Itoa(r), "0")
	mustProbe(t, "report", "--format", "pprof", "-o", prof, rec)
	mustProbe(t, "report", "--format", "json", "-o", js, rec)
	var mainTime, leafTime int64
	for _, e := range readJSONLines(t, js) {
		if e.Event == "func_exit" && e.Func == "main" {
			mainTime += *e.Duration
		}
		if e.Event == "func_exit" && e.Func == "leaf" {
			leafTime += *e.Duration
		}
	}
	f, err := os.Open(prof)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := pprofile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var total, leafFlat int64
	for _, s := range p.Sample {
		total += s.Value[1]
		if s.Location[0].Line[0].Function.Name == "leaf" {
			leafFlat += s.Value[1]
		}
	}
	if total != mainTime || leafFlat != leafTime || p.SampleType[1].Unit != "nanoseconds" {
		t.Errorf("profile: %d ns in all, %d in leaf; the recording: main %d ns, leaf %d ns", total, leafFlat, mainTime, leafTime)
	}
}

// TestOutputFoldedOnlyStacks: a folded file holds stack lines alone
// (flamegraph.pl ignores, with a warning, any other line); what probe
// has to say of the trace, here that --args found no arguments to show
// in a program without DWARF and that longjmp lost returns, goes to
// stderr.
func TestOutputFoldedOnlyStacks(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "ret_nodwarf", filepath.Join("testdata", "ret.c"), "-O2")
	folded := filepath.Join(t.TempDir(), "out.folded")
	r := probe(t, "run", "--args", "--tracer", "function_graph", "--filter", "mid,leaf", "--format", "folded", "-o", folded, "--", exe, "4")
	want := "probe: --args: 2 functions traced without their arguments (no DWARF, no prototype): leaf, mid\n" +
		"probe: 4 returns lost (calls that never returned: longjmp, an exception, a stack not switched back to, a thread gone)\n"
	if r.code != 0 || r.stderr != want {
		t.Fatalf("probe run: %v\nwant stderr %q", r, want)
	}
	b, err := os.ReadFile(folded)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^(mid(;leaf)? \d+\n)+$`).Match(b) {
		t.Errorf("folded file:\n%s\nwant lines of mid and mid;leaf and their times alone", b)
	}
}

// TestOutputFoldedSumsToTracedTime: from one recording, the folded stacks
// add up to the function_graph trace's time in outermost calls, exactly
// in nanoseconds (against the JSON durations) and to the microsecond
// digits the text trace prints.
func TestOutputFoldedSumsToTracedTime(t *testing.T) {
	exe := tracerBin(t, "shape_O0_pie")
	dir := t.TempDir()
	rec := filepath.Join(dir, "trace.bin")
	mustProbe(t, "record", "-o", rec, "--tracer", "function_graph", "--", exe, "2", "3", "0")
	folded := mustProbe(t, "report", "--format", "folded", rec).stdout
	var sum int64
	stacks := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(folded, "\n"), "\n") {
		i := strings.LastIndexByte(l, ' ')
		v, err := strconv.ParseInt(l[i+1:], 10, 64)
		if i < 0 || err != nil || strings.HasPrefix(l, "#") {
			t.Fatalf("folded line %q", l)
		}
		sum += v
		stacks[l[:i]] = true
	}
	for _, s := range []string{"main", "main;top", "main;top;mid", "main;top;mid;leaf", "main;recurse;recurse;recurse;recurse"} {
		if !stacks[s] {
			t.Errorf("no stack %s in\n%s", s, folded)
		}
	}
	js := filepath.Join(dir, "trace.json")
	mustProbe(t, "report", "--format", "json", "-o", js, rec)
	var outer int64
	for _, e := range readJSONLines(t, js) {
		if e.Event == "func_exit" && *e.Depth == 0 {
			outer += *e.Duration
		}
	}
	if sum != outer || sum == 0 {
		t.Errorf("folded stacks sum to %d ns, the outermost calls last %d ns", sum, outer)
	}
	// The text trace: main is the one outermost call.
	text := mustProbe(t, "report", rec).stdout
	m := regexp.MustCompile(`(?m)\|\s*[-+!#*@$]?\s*([0-9.]+) us\s*\|  }$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no outermost return in\n%s", text)
	}
	us, _ := strconv.ParseFloat(m[1], 64)
	// ftrace cuts the number to 7 digits: a long call (a slow machine, a
	// guest) keeps fewer decimals, truncated, not rounded.
	unit := 1.0
	if i := strings.IndexByte(m[1], '.'); i >= 0 {
		unit = math.Pow(10, -float64(len(m[1])-i-1))
	}
	if d := float64(sum)/1e3 - us; d < -1e-6 || d >= unit-1e-6 {
		t.Errorf("folded stacks sum to %d ns, the text trace says main took %s us", sum, m[1])
	}
}

// normalize blanks what differs between two runs of the same program:
// pids, CPUs, times and durations.
func normalize(s string) string {
	for _, r := range []struct{ re, with string }{
		{`-\d+ +\[\d+\]\s+\d+\.\d+:`, "-PID [CPU] TIME:"},       // text
		{`(?m)^ *\d+\) +(\S+?)-\d+ *(\||=>)`, "CPU) $1-PID $2"}, // function_graph
		{`(?m)=> +(\S+?)-\d+ *$`, "=> $1-PID"},
		{`\|[ +!#*@$]*[0-9.]+ us *\|`, "| DURATION |"},
	} {
		s = regexp.MustCompile(r.re).ReplaceAllString(s, r.with)
	}
	return s
}

// TestOutputRecordReport: probe report prints a recording as the live
// run printed its trace, for probes and for function_graph; the same
// recording converts to JSON with one line per record.
func TestOutputRecordReport(t *testing.T) {
	exe := tracerBin(t, "shape_O0_pie")
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"probes", []string{"p:mid x=%di:s32", "r:leaf $retval:s32", "p:recurse n=$arg1:u32"}},
		{"function_graph", []string{"--tracer", "function_graph"}},
		{"function", []string{"--tracer", "function"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			live, rec := filepath.Join(dir, "live.txt"), filepath.Join(dir, "trace.bin")
			cmd := []string{"--", exe, "2", "2", "0"}
			mustProbe(t, append(append([]string{"run", "-o", live}, tc.args...), cmd...)...)
			recorded := mustProbe(t, append(append([]string{"record", "-o", rec}, tc.args...), cmd...)...)
			if recorded.stdout != shapeOut(2, 2, 0) {
				t.Errorf("record printed %q: the trace must go to the file only", recorded.stdout)
			}
			want, err := os.ReadFile(live)
			if err != nil {
				t.Fatal(err)
			}
			got := mustProbe(t, "report", rec).stdout
			if normalize(got) != normalize(string(want)) || len(textEvents(t, live)) < 10 {
				t.Errorf("report:\n%s\nlive:\n%s", got, want)
			}
			// -o and --format on the same recording.
			js := filepath.Join(dir, "r.json")
			mustProbe(t, "report", "--format", "json", "-o", js, rec)
			if evs := readJSONLines(t, js); len(evs) == 0 {
				t.Error("no JSON events")
			}
		})
	}
}

// lastFrame finds the payload of a recording's last frame of kind (its
// start and end in data; 0, 0 if none).
func lastFrame(t *testing.T, data []byte, kind byte) (start, end int) {
	t.Helper()
	at := bytes.IndexByte(data, '\n') + 1      // "probe-trace"
	at += bytes.IndexByte(data[at:], '\n') + 1 // the version
	for at < len(data) {
		k := data[at]
		n, w := binary.Uvarint(data[at+1:])
		if w <= 0 || at+1+w+int(n) > len(data) {
			t.Fatalf("a frame at %d of %d bytes: cannot be read", at, len(data))
		}
		if at += 1 + w; k == kind {
			start, end = at, at+int(n)
		}
		at += int(n)
	}
	return start, end
}

// TestOutputReportTruncated: a recording cut short reports its whole
// records, a prefix of the full report, and says it was cut; a file that
// is no recording is refused with exit status 2.
func TestOutputReportTruncated(t *testing.T) {
	exe := tracerBin(t, "shape_O0_pie")
	dir := t.TempDir()
	// Hits that stop the thread are a record each; those recorded in
	// the tracee go raw, a drain's pass a frame (here all in one: the
	// cut reaches into it, and what is whole of it is reported; before,
	// the frame was lost whole, and the report had no line).
	for _, mode := range []struct {
		flags []string
		least int // lines the cut report keeps at the least
	}{{[]string{"--no-inprocess"}, 5}, {nil, 5}} {
		rec := filepath.Join(dir, "trace.bin")
		mustProbe(t, append(append([]string{"record"}, mode.flags...), "-o", rec, "p:leaf x=%di:s32", "--", exe, "4", "0", "0")...)
		full := mustProbe(t, "report", rec).stdout
		data, err := os.ReadFile(rec)
		if err != nil {
			t.Fatal(err)
		}
		at := len(data) * 2 / 3
		if start, end := lastFrame(t, data, 'C'); end > 0 {
			at = (start + end) / 2 // (x86-64: in the raw pass's frame)
		}
		cut := filepath.Join(dir, "cut.bin")
		if err := os.WriteFile(cut, data[:at], 0o644); err != nil {
			t.Fatal(err)
		}
		r := probe(t, "report", cut)
		if r.code != 0 || !strings.Contains(r.stderr, "recording cut short after") {
			t.Fatalf("%v: cut recording: %v", mode.flags, r)
		}
		lines := strings.Split(r.stdout, "\n")
		got := slices.DeleteFunc(lines, func(l string) bool { return l == "" })
		t.Logf("%v: %d of %d lines", mode.flags, len(got), strings.Count(full, "\n"))
		if len(got) < mode.least || len(got) >= strings.Count(full, "\n") || !strings.HasPrefix(full, strings.Join(got, "\n")+"\n") {
			t.Errorf("%v: cut report is not a shorter prefix of the full one:\n%s\nfull:\n%s", mode.flags, r.stdout, full)
		}
	}

	for _, f := range []string{exe, filepath.Join(dir, "empty")} {
		os.WriteFile(filepath.Join(dir, "empty"), nil, 0o644)
		r := probe(t, "report", f)
		if r.code != 2 || !strings.Contains(r.stderr, "not a probe recording") || r.stdout != "" {
			t.Errorf("report %s: %v", f, r)
		}
	}
}

// TestOutputBadFormat: a bad --format is refused before the program runs.
func TestOutputBadFormat(t *testing.T) {
	exe := tracerBin(t, "shape_O0_pie")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "xml"}, `unknown format "xml"`},
		{[]string{"--format", "folded", "p:leaf"}, "--format folded: no call stacks to show: give --tracer function_graph, or a probe with => stacktrace"},
		{[]string{"--format", "pprof", "--tracer", "function"}, "--format pprof: needs --tracer function_graph"},
	} {
		r := probe(t, append(append([]string{"run"}, tc.args...), "--", exe, "1", "0", "0")...)
		if r.code != 2 || !strings.Contains(r.stderr, tc.want) || r.stdout != "" {
			t.Errorf("%q: %v\nwant exit 2 and %q, the program not run", tc.args, r, tc.want)
		}
	}
	if r := probe(t, "report", "--format", "xml", "nosuchfile"); r.code != 2 {
		t.Errorf("report --format xml: %v", r)
	}
}

// TestOutputBufferFull: with a buffer of one event and a reader who has
// stopped reading, the function_graph records the writer cannot take are
// dropped, counted and reported: written and lost add up to the
// program's calls. In-process, the rings hold what the writer cannot take
// yet: nothing is lost.
func TestOutputBufferFull(t *testing.T) {
	exe := tracerBin(t, "shape_O0_pie")
	out := filepath.Join(t.TempDir(), "t")
	mustProbe(t, "run", "--buffer-size", "1", "--tracer", "function_graph", "--format", "json", "-o", out, "--", exe, "3", "0", "0")
	if data, _ := os.ReadFile(out); strings.Contains(string(data), "lost") || len(readJSONLines(t, out)) != 64 {
		t.Errorf("in-process: want 64 records and nothing lost, got\n%s", data)
	}
	calls := builtOnce(t, "pipeline-calls", filepath.Join("testdata", "pipeline", "calls.c"), "-O2", "-g")
	const n = 2000
	records := 2*n + 2 // one() n times, and main
	base := runCmd(t, nil, calls, strconv.Itoa(n))
	for _, format := range []string{"json", "text"} {
		data := stalledReader(t, base.stdout, "run", "--no-inprocess", "--buffer-size", "1", "--tracer", "function_graph", "--format", format, "--", calls, strconv.Itoa(n))
		m := regexp.MustCompile(`# (\d+) events lost \(buffer full\)|"comment":"(\d+) events lost \(buffer full\)"`).FindStringSubmatch(data)
		if m == nil {
			t.Fatalf("%s: no lost-events note in\n%s", format, data)
		}
		lost, _ := strconv.Atoi(m[1] + m[2])
		t.Logf("%s: %d of %d records lost", format, lost, records)
		if format == "json" {
			written := strings.Count(data, `"event":"func_`)
			if lost == 0 || written+lost != records {
				t.Errorf("json: %d written + %d lost, want %d records and some lost", written, lost, records)
			}
		} else if lost == 0 || lost >= records {
			t.Errorf("text: %d lost of %d", lost, records)
		}
	}
}

// stalledReader runs probe with args and -o a FIFO of one page that it
// reads only once the program has printed want (its last line): the
// trace's first lines fill the pipe, and the writer waits there while
// the program goes on. It returns what probe wrote to the FIFO.
func stalledReader(t *testing.T, want string, args ...string) string {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(fifo, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETPIPE_SZ, 4096); err != nil {
		t.Fatal(err)
	}
	r := os.NewFile(uintptr(fd), fifo)
	defer r.Close()
	p := startBg(t, nil, probeBin, append(args[:1:1], append([]string{"-o", fifo}, args[1:]...)...)...)
	p.waitStdout(t, want, 60*time.Second)
	time.Sleep(200 * time.Millisecond) // main's return
	if err := unix.SetNonblock(fd, false); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if res := p.wait(t, 30*time.Second); res.code != 0 || res.stdout != want {
		t.Fatalf("probe %q: want exit 0 and %q; got %v", args, want, res)
	}
	return string(data)
}
