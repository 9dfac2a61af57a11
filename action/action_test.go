package action

import (
	"errors"
	"math/bits"
	"strings"
	"sync"
	"testing"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/probe"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		in, spec, acts string
		has            bool
	}{
		{"p:work", "p:work", "", false},
		{"p:work => count", "p:work", "count", true},
		{"p:work n=%di if n > 3 => count:n hist:n", "p:work n=%di if n > 3", "count:n hist:n", true},
		{`p:work $comm if comm == "a=>b" => print`, `p:work $comm if comm == "a=>b"`, "print", true},
		{`p:work $comm if comm == "a\"=>b" => print`, `p:work $comm if comm == "a\"=>b"`, "print", true},
		{`p:work $comm if comm == "a=>b"`, `p:work $comm if comm == "a=>b"`, "", false},
		{"p:work n=%di if n >= 3=>count", "p:work n=%di if n >= 3", "count", true},
	} {
		spec, acts, has := Split(tc.in)
		if spec != tc.spec || acts != tc.acts || has != tc.has {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q, %v", tc.in, spec, acts, has, tc.spec, tc.acts, tc.has)
		}
	}
}

func TestParse(t *testing.T) {
	acts, err := Parse("print count count:comm,n hist:n hist:n:log2 hist:duration:linear=100 stacktrace traceon traceoff enable:ev disable:grp/ev sum:n avg:n:comm,tid min:duration max:n:stack hist:n:linear=8:key=comm hist:n:key=tid,n")
	if err != nil {
		t.Fatal(err)
	}
	want := []Action{
		{Kind: Print, Text: "print"},
		{Kind: Count, Text: "count"},
		{Kind: Count, Text: "count:comm,n", Keys: []string{"comm", "n"}},
		{Kind: Hist, Text: "hist:n", Field: "n"},
		{Kind: Hist, Text: "hist:n:log2", Field: "n"},
		{Kind: Hist, Text: "hist:duration:linear=100", Field: "duration", Step: 100},
		{Kind: Stacktrace, Text: "stacktrace"},
		{Kind: TraceOn, Text: "traceon"},
		{Kind: TraceOff, Text: "traceoff"},
		{Kind: Enable, Text: "enable:ev", Event: "ev"},
		{Kind: Disable, Text: "disable:grp/ev", Event: "grp/ev"},
		{Kind: Sum, Text: "sum:n", Field: "n"},
		{Kind: Avg, Text: "avg:n:comm,tid", Field: "n", Keys: []string{"comm", "tid"}},
		{Kind: Min, Text: "min:duration", Field: "duration"},
		{Kind: Max, Text: "max:n:stack", Field: "n", Keys: []string{"stack"}},
		{Kind: Hist, Text: "hist:n:linear=8:key=comm", Field: "n", Step: 8, Keys: []string{"comm"}},
		{Kind: Hist, Text: "hist:n:key=tid,n", Field: "n", Keys: []string{"tid", "n"}},
	}
	if len(acts) != len(want) {
		t.Fatalf("got %d actions, want %d", len(acts), len(want))
	}
	for i := range want {
		a, w := acts[i], want[i]
		if a.Kind != w.Kind || a.Text != w.Text || strings.Join(a.Keys, ",") != strings.Join(w.Keys, ",") || a.Field != w.Field || a.Step != w.Step || a.Event != w.Event {
			t.Errorf("action %d = %+v, want %+v", i, a, w)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, token string }{
		{"frob", "frob"},
		{"count frob:x", "frob:x"},
		{"count:", "count:"},
		{"count:a,,b", "count:a,,b"},
		{"count:1a", "count:1a"},
		{"hist", "hist"},
		{"hist:", "hist:"},
		{"hist:n:linear=0", "hist:n:linear=0"},
		{"hist:n:linear=x", "hist:n:linear=x"},
		{"hist:n:linear=-5", "hist:n:linear=-5"},
		{"hist:n:cubic", "hist:n:cubic"},
		{"print:x", "print:x"},
		{"stacktrace:5", "stacktrace:5"},
		{"enable", "enable"},
		{"disable:a/b/c", "disable:a/b/c"},
		{"enable:/x", "enable:/x"},
		{"sum", "sum"},
		{"avg:", "avg:"},
		{"min:n:a,,b", "min:n:a,,b"},
		{"max:1n", "max:1n"},
		{"hist:n:key=", "hist:n:key="},
		{"hist:n:log2:frob", "hist:n:log2:frob"},
	} {
		_, err := Parse(tc.in)
		var ae *Error
		if !errors.As(err, &ae) || ae.Token != tc.token || !errors.Is(err, fetch.ErrBadInput) {
			t.Errorf("Parse(%q) = %v; want a bad-input error naming %q", tc.in, err, tc.token)
		}
	}
}

func TestCompileChecks(t *testing.T) {
	entry := Probe{Event: "probe/p_work_0", Fields: []string{"n", "s"}}
	ret := Probe{Event: "probe/r_work_0", Fields: []string{"arg1"}, Return: true}
	for _, tc := range []struct {
		p     Probe
		in    string
		token string // "" when it compiles
	}{
		{entry, "count:n,comm,tid,cpu hist:n hist:s:linear=4", ""},
		{entry, "count:x", "count:x"},
		{entry, "count:n,x", "count:n,x"},
		{entry, "hist:x", "hist:x"},
		{entry, "hist:duration", "hist:duration"},
		{ret, "hist:duration hist:arg1", ""},
		{ret, "hist:comm", "hist:comm"},
	} {
		acts, err := Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		_, err = NewSession().Compile(tc.p, acts)
		var ae *Error
		switch {
		case tc.token == "" && err != nil:
			t.Errorf("Compile(%q): %v", tc.in, err)
		case tc.token != "" && (!errors.As(err, &ae) || ae.Token != tc.token):
			t.Errorf("Compile(%q) = %v; want an error naming %q", tc.in, err, tc.token)
		}
	}
}

func hit(comm string, tid int, n int64) *probe.Hit {
	return &probe.Hit{Comm: comm, Tid: tid, Fields: []fetch.Field{{Name: "n", Value: fetch.UintValue(fetch.TypeS64, uint64(n))}}}
}

func compile(t *testing.T, s *Session, p Probe, text string) *Plan {
	t.Helper()
	acts, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := s.Compile(p, acts)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

func TestCountAndHistDraw(t *testing.T) {
	s := NewSession()
	pl := compile(t, s, Probe{Event: "probe/p_work_0", Fields: []string{"n"}}, "count:comm count:n hist:n hist:n:linear=10")
	values := []int64{0, 1, 2, 3, 5, 8, 13, 21, 21, -4}
	for i, v := range values {
		comm := "a"
		if i%3 == 0 {
			comm = "b"
		}
		if pl.Run(hit(comm, 100+i, v)) {
			t.Fatal("an event with only count/hist actions printed")
		}
	}
	var b strings.Builder
	if err := s.Draw(&b); err != nil {
		t.Fatal(err)
	}
	bar := func(n int) string { return strings.Repeat("@", n) + strings.Repeat(" ", barWidth-n) }
	want := "# count:comm of probe/p_work_0: 10 hits, 2 keys\n" +
		"comm=a        6 |" + bar(40) + "|\n" +
		"comm=b        4 |" + bar(26) + "|\n" +
		"# count:n of probe/p_work_0: 10 hits, 9 keys\n" +
		"n=21        2 |" + bar(40) + "|\n" +
		"n=-4        1 |" + bar(20) + "|\n" +
		"n=0         1 |" + bar(20) + "|\n" +
		"n=1         1 |" + bar(20) + "|\n" +
		"n=13        1 |" + bar(20) + "|\n" +
		"n=2         1 |" + bar(20) + "|\n" +
		"n=3         1 |" + bar(20) + "|\n" +
		"n=5         1 |" + bar(20) + "|\n" +
		"n=8         1 |" + bar(20) + "|\n" +
		"# hist:n of probe/p_work_0 (log2): 10 values, sum 70\n" +
		"(..., 0)        1 |" + bar(20) + "|\n" +
		"[0]             1 |" + bar(20) + "|\n" +
		"[1]             1 |" + bar(20) + "|\n" +
		"[2, 4)          2 |" + bar(40) + "|\n" +
		"[4, 8)          1 |" + bar(20) + "|\n" +
		"[8, 16)         2 |" + bar(40) + "|\n" +
		"[16, 32)        2 |" + bar(40) + "|\n" +
		"# hist:n:linear=10 of probe/p_work_0 (linear, step 10): 10 values, sum 70\n" +
		"[-10, 0)        1 |" + bar(6) + "|\n" +
		"[0, 10)         6 |" + bar(40) + "|\n" +
		"[10, 20)        1 |" + bar(6) + "|\n" +
		"[20, 30)        2 |" + bar(13) + "|\n"
	if got := b.String(); got != want {
		t.Errorf("Draw:\n%s\nwant:\n%s", got, want)
	}
}

func TestDurationHist(t *testing.T) {
	s := NewSession()
	pl := compile(t, s, Probe{Event: "probe/r_work_0", Return: true}, "hist:duration")
	for _, d := range []int64{1000, 1500, 3000} {
		pl.Run(&probe.Hit{Time: 10000 + d, Return: &probe.Return{EntryTime: 10000}})
	}
	var b strings.Builder
	s.Draw(&b)
	if !strings.Contains(b.String(), "3 values, sum 5500\n[512, 1024)         1 |") ||
		!strings.Contains(b.String(), "[1024, 2048)        1 |") || !strings.Contains(b.String(), "[2048, 4096)        1 |") {
		t.Errorf("Draw:\n%s", b.String())
	}
}

func TestPrintAndTraceSwitches(t *testing.T) {
	s := NewSession()
	ev := Probe{Event: "probe/p_tick_0"}
	plain := compile(t, s, ev, "")
	counted := compile(t, s, ev, "count")
	printed := compile(t, s, ev, "count print")
	stack := compile(t, s, ev, "stacktrace")
	off := compile(t, s, Probe{Event: "probe/p_off_0"}, "traceoff")
	on := compile(t, s, Probe{Event: "probe/p_on_0"}, "print traceon")
	h := hit("a", 1, 0)
	if !plain.Run(h) || counted.Run(h) || !printed.Run(h) || !stack.Run(h) || !stack.Stack() || plain.Stack() {
		t.Fatal("print decisions wrong with tracing on")
	}
	if off.Run(h) || s.Tracing() {
		t.Fatal("traceoff printed or did not turn tracing off")
	}
	if plain.Run(h) || printed.Run(h) || stack.Run(h) {
		t.Fatal("an event printed with tracing off")
	}
	if !on.Run(h) || !s.Tracing() || !plain.Run(h) {
		t.Fatal("traceon's own event did not print, or tracing stayed off")
	}
}

func TestEnableDisable(t *testing.T) {
	s := NewSession()
	pl := compile(t, s, Probe{Event: "probe/p_off_0"}, "disable:p_tick_0 enable:grp/other")
	target, other := &probe.Probe{Event: "p_tick_0"}, &probe.Probe{Group: "grp", Event: "other"}
	target.SetEnabled(true)
	err := pl.Bind(func(ev string) []*probe.Probe {
		switch ev {
		case "p_tick_0":
			return []*probe.Probe{target}
		case "grp/other":
			return []*probe.Probe{other}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pl.Run(hit("a", 1, 0))
	if target.Enabled() || !other.Enabled() {
		t.Errorf("after the hit: p_tick_0 enabled %v (want false), other %v (want true)", target.Enabled(), other.Enabled())
	}
	err = compile(t, s, Probe{Event: "x"}, "enable:nosuch").Bind(func(string) []*probe.Probe { return nil })
	var ae *Error
	if !errors.As(err, &ae) || ae.Token != "enable:nosuch" {
		t.Errorf("Bind of an unknown event = %v", err)
	}
}

// TestDrawWhileCounting is for -race: the ptrace thread counts while the
// REPL's stats draws.
func TestDrawWhileCounting(t *testing.T) {
	s := NewSession()
	pl := compile(t, s, Probe{Event: "probe/p_work_0", Fields: []string{"n"}}, "count:n hist:n")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 20000; i++ {
			pl.Run(hit("a", 1, int64(i%7)))
		}
	}()
	for i := 0; i < 50; i++ {
		var b strings.Builder
		s.Draw(&b)
	}
	wg.Wait()
	var b strings.Builder
	s.Draw(&b)
	if !strings.Contains(b.String(), "# count:n of probe/p_work_0: 20000 hits, 7 keys\n") {
		t.Errorf("Draw:\n%s", b.String())
	}
}

func TestCountAllocs(t *testing.T) {
	s := NewSession()
	pl := compile(t, s, Probe{Event: "probe/p_work_0", Fields: []string{"n"}}, "count:comm,n hist:n")
	h := hit("a", 1, 5)
	pl.Run(h)
	if n := testing.AllocsPerRun(100, func() { pl.Run(h) }); n != 0 {
		t.Errorf("a hit of a known key allocates %v times", n)
	}
}

// TestTally: what a plan lets the tracee count itself, and the tables
// its counts make are those of the same hits run one by one.
func TestTally(t *testing.T) {
	p := Probe{Event: "probe/p_work_0", Fields: []string{"n", "m"}}
	for text, ok := range map[string]bool{
		"count": true, "count:comm,tid hist:n": true, "hist:n hist:m": true,
		"print count": false, "count:cpu": false, "count:n": false, "hist:n:linear=4": false,
		"stacktrace": false, "traceoff count": false,
	} {
		if got := compile(t, NewSession(), p, text).Tally() != nil; got != ok {
			t.Errorf("%q: Tally %v, want %v", text, got, ok)
		}
	}
	const text = "count:comm,tid hist:n"
	byHit, byTally := NewSession(), NewSession()
	run, tally := compile(t, byHit, p, text), compile(t, byTally, p, text).Tally()
	values := map[int][]int64{7: {0, 1, 5, -3, 1 << 40}, 9: {2, 2}}
	for tid, vs := range values {
		d := probe.TallyDelta{Tid: tid, Comm: "w", Hits: uint64(len(vs)), Hists: make([]probe.Log2Hist, 1)}
		for _, v := range vs {
			run.Run(hit("w", tid, v))
			h := &d.Hists[0]
			h.Sum += v
			if v < 0 {
				h.Negative++
			} else {
				h.Buckets[bits.Len64(uint64(v))]++
			}
		}
		tally.Add(d)
	}
	var want, got strings.Builder
	byHit.Draw(&want)
	byTally.Draw(&got)
	if got.String() != want.String() || !strings.Contains(got.String(), "comm=w, tid=7        5 |") {
		t.Errorf("counted in the tracee:\n%s\nhit by hit:\n%s", got.String(), want.String())
	}
}

// TestPrintf: printf's format is C's: flags, width, precision and length
// modifiers, signed and unsigned, hex, octal, characters, strings,
// pointers and %%, of fields, comm, pid, tid, cpu and a return's
// duration; a string or a fault given to a number's verb shows as its
// text; it prints nothing with tracing off, and the event is not
// printed unless print is listed too.
func TestPrintf(t *testing.T) {
	s := NewSession()
	fields := []string{"n", "u", "name", "bad"}
	pl := compile(t, s, Probe{Event: "probe/r_work_0", Fields: fields, Return: true},
		`printf("%d %5ld|%-4u|%x %#lx %o %c %s|%.2s|%8s|%p %d%% ", n, n, u, u, u, u, u, name, name, comm, u, bad) printf("pid=%d tid=%i cpu=%u took %llu\n", pid, tid, cpu, duration)`)
	printed := compile(t, s, Probe{Event: "probe/p_work_0", Fields: fields}, `print printf("%s\n", n)`)
	h := &probe.Hit{Comm: "w", Pid: 7, Tid: 8, CPU: 1, Time: 1500, Return: &probe.Return{EntryTime: 1000}, Fields: []fetch.Field{
		{Name: "n", Value: fetch.UintValue(fetch.TypeS64, uint64(1<<64-3))},
		{Name: "u", Value: fetch.UintValue(fetch.TypeU64, 65)},
		{Name: "name", Value: fetch.StringValue("hello")},
		{Name: "bad", Value: fetch.FaultValue(fetch.TypeU64)},
	}}
	if pl.Run(h) || !printed.Run(h) {
		t.Fatal("printf printed the event, or print with printf did not")
	}
	want := "-3    -3|65  |41 0x41 101 A hello|he|       w|0x41 " + fetch.FaultString + "% pid=7 tid=8 cpu=1 took 500\n"
	if got := string(pl.AppendPrinted(nil)); got != want {
		t.Errorf("printed %q\nwant    %q", got, want)
	}
	if got := string(printed.AppendPrinted(nil)); got != "-3\n" {
		t.Errorf("%%s of a number: %q", got)
	}
	s.SetTracing(false)
	if pl.Run(h); len(pl.AppendPrinted(nil)) != 0 {
		t.Errorf("printed %q with tracing off", pl.AppendPrinted(nil))
	}
}

// TestPrintfErrors: a printf that cannot print is bad input naming
// itself: its format's conversions against its arguments, an unknown
// conversion, an argument that is no field, duration at an entry, the
// syntax.
func TestPrintfErrors(t *testing.T) {
	p := Probe{Event: "probe/p_work_0", Fields: []string{"n"}}
	for text, why := range map[string]string{
		`printf("%d %d\n", n)`:   "2 conversions for 1 arguments",
		`printf("%d\n")`:         "1 conversions for 0 arguments",
		`printf("%f\n", n)`:      `"%f": no such conversion`,
		`printf("%l", n)`:        "ends in the middle",
		`printf("%d\n", m)`:      "m is not a field of probe/p_work_0",
		`printf("%d", duration)`: "duration is only known at a return probe",
		`printf("%d" n)`:         "want a comma after the format",
		`printf("%d, n)`:         "unclosed quote",
		`printf(n)`:              `want printf("FORMAT", FIELD, ...)`,
		`printf("%d", n+1)`:      `bad argument "n+1"`,
		`printf("\q")`:           "bad format",
	} {
		acts, err := Parse(text)
		if err == nil {
			_, err = NewSession().Compile(p, acts)
		}
		if err == nil || !strings.Contains(err.Error(), why) || !errors.Is(err, fetch.ErrBadInput) || !strings.Contains(err.Error(), "bad action") {
			t.Errorf("%s: %v, want an error saying %q", text, err, why)
		}
	}
}

// TestMarks: mark:NAME notes each thread's time at a hit, and @NAME reads
// the time since it, by thread, in hist, sum and printf; a thread with
// no mark yet adds nothing (printf shows ?); the hit that marks reads
// the mark before it; a plan reading a mark no probe makes is refused at
// Bind, and bad mark actions at Parse.
func TestMarks(t *testing.T) {
	s := NewSession()
	lock := compile(t, s, Probe{Event: "probe/p_lock_0"}, "mark:t0")
	unlock := compile(t, s, Probe{Event: "probe/p_unlock_0"}, `hist:@t0 max:@t0 printf("held %d\n", @t0)`)
	again := compile(t, s, Probe{Event: "probe/p_again_0"}, `mark:t0 printf("since %d\n", @t0)`)
	for _, pl := range []*Plan{lock, unlock, again} {
		if err := pl.Bind(func(string) []*probe.Probe { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	at := func(tid int, time int64) *probe.Hit { return &probe.Hit{Tid: tid, Time: time} }
	printed := func(pl *Plan, h *probe.Hit) string {
		pl.Run(h)
		return string(pl.AppendPrinted(nil))
	}
	if got := printed(unlock, at(1, 50)); got != "held ?\n" {
		t.Errorf("before any mark: %q", got)
	}
	lock.Run(at(1, 100))
	lock.Run(at(2, 150))
	if got := printed(unlock, at(1, 130)); got != "held 30\n" {
		t.Errorf("thread 1: %q", got)
	}
	if got := printed(unlock, at(2, 400)); got != "held 250\n" {
		t.Errorf("thread 2: %q", got)
	}
	if got := printed(again, at(1, 500)); got != "since 400\n" {
		t.Errorf("a hit that marks reads the mark before it: %q", got)
	}
	if got := printed(unlock, at(1, 510)); got != "held 10\n" {
		t.Errorf("after the mark again: %q", got)
	}
	var b strings.Builder
	s.Draw(&b)
	if !strings.Contains(b.String(), "hist:@t0 of probe/p_unlock_0 (log2): 3 values, sum 290") || !strings.Contains(b.String(), "max:@t0 of probe/p_unlock_0") || !strings.Contains(b.String(), "250") {
		t.Errorf("Draw:\n%s", b.String())
	}

	// Marks are set and read hit by hit: no count of the tracee's.
	if counted, read := compile(t, s, Probe{Event: "probe/p_c_0"}, "mark:t1 count"), compile(t, s, Probe{Event: "probe/p_r_0"}, "hist:@t1"); counted.Tally() != nil || read.Tally() != nil {
		t.Error("a plan that marks, or reads a mark, counted in the tracee")
	}

	lone := compile(t, NewSession(), Probe{Event: "probe/p_x_0"}, "hist:@nosuch")
	if err := lone.Bind(func(string) []*probe.Probe { return nil }); err == nil || !strings.Contains(err.Error(), "no probe marks nosuch") || !errors.Is(err, fetch.ErrBadInput) {
		t.Errorf("Bind of an unmarked @nosuch: %v", err)
	}
	for _, text := range []string{"mark", "mark:", "mark:1x", "count:@t0"} {
		if _, err := Parse(text); err == nil || !errors.Is(err, fetch.ErrBadInput) {
			t.Errorf("Parse(%q): %v", text, err)
		}
	}
}
