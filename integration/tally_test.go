package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The tests of probes counted in the tracee (probe/tally.go): a probe
// whose actions only count hits and draw log2 histograms of register and
// stack values makes no record; its stub adds to counters in its thread's
// ring header. tally.c calls f(v, w, x) with values that cover signed,
// unsigned, top-bit and part-register cases, the same in every run.

func tallyBin(t *testing.T) string {
	t.Helper()
	return builtOnce(t, "tally", filepath.Join("testdata", "inprocess", "tally.c"), "-O2", "-g", "-Wall", "-pthread")
}

// tallyProbes are counted in the tracee: every type a stub converts
// (x64 with its top bit, s32 of a 32-bit register, s8 and u8, a
// bitfield, the second byte of %dx, $argN as s16), several probes and
// histograms at one site, count by comm; filters the stub tests (signed
// and unsigned comparisons, &, &&, ||, !).
var tallyProbes = []string{
	"p:t/v f v=%di => hist:v",
	"p:t/s f s=%edi:s32 => hist:s count:comm",
	"p:t/c f c=%di:s8 u=%di:u8 => hist:c hist:u count",
	"p:t/b f b=%di:b5@3/64 => hist:b",
	"p:t/h f h=" + dxHigh + " a=$arg2:s16 => hist:h hist:a",
	"p:t/neg f c=%di:s8 if c < 0 => count hist:c",
	"p:t/and f v=%di u=%di:u8 if u >= 100 && u <= 200 || v & 0x10 => hist:u count",
	"p:t/not f s=%edi:s32 if !(s > -5000) => count",
	"p:t/x f h=" + dxHigh + " if h == 7 => count:comm",
}

// dxHigh is the second byte of the third argument's register: arm64 has
// no name for it, but a bitfield.
var dxHigh = map[string]string{"amd64": "%dh", "arm64": "%x2:b8@8/64"}[runtime.GOARCH]

// TestTallyMatchesStops: the tables counted in the tracee are those a
// stop at every hit draws, to the sums; -v says each probe is counted in
// the tracee; the program prints what it prints untraced.
func TestTallyMatchesStops(t *testing.T) {
	t.Parallel()
	exe := tallyBin(t)
	base := runCmd(t, nil, exe, "2", "20000")
	var tables [2]string
	for i, flag := range []string{"--no-inprocess", ""} {
		out := filepath.Join(t.TempDir(), "trace")
		args := []string{"run", "-v", "-o", out}
		if flag != "" {
			args = append(args, flag)
		}
		args = append(append(args, tallyProbes...), "--", exe, "2", "20000")
		r := probe(t, args...)
		if r.code != 0 || r.stdout != base.stdout {
			t.Fatalf("probe %v: want exit 0 and %q; got %v", args, base.stdout, r)
		}
		for _, ev := range []string{"b", "c", "h", "s", "v", "neg", "and", "not", "x"} {
			want := "probe: t/" + ev + ": in-process, counted in the tracee\n"
			if flag != "" {
				want = "probe: t/" + ev + ": stops the thread (--no-inprocess)\n"
			}
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%s: no %q in\n%s", flag, want, r.stderr)
			}
		}
		b, _ := os.ReadFile(out)
		tables[i] = string(b)
	}
	if tables[0] != tables[1] {
		t.Fatalf("counted in the tracee:\n%s\nwith a stop at each hit:\n%s", tables[1], tables[0])
	}
	for _, want := range []string{
		"# hist:v of t/v (log2): 40000 values, sum 4088473087190983176\n",
		"# count:comm of t/s: 40000 hits, 1 key\ncomm=tally    40000 |",
		"# hist:c of t/c (log2): 40000 values, sum -19104\n(..., 0)     19994 |",
		"# hist:u of t/c (log2): 40000 values, sum 5099360\n",
		"# hist:b of t/b (log2): 40000 values, sum 619920\n",
		"# count of t/neg: 19994 hits, 1 key\n",
		"# hist:u of t/and (log2): 28280 values, sum 3940224\n",
		"# count of t/not: 20000 hits, 1 key\n",
		"# count:comm of t/x: 512 hits, 1 key\n",
	} {
		if !strings.Contains(tables[1], want) {
			t.Errorf("no %q in\n%s", want, tables[1])
		}
	}
}

// TestTallyNoRecords: 8 threads x 100,000 hits counted into rings of 4
// KiB, which would hold ~100 records: nothing lost, every hit counted,
// by thread too; and a signal handler that hits the probe in the middle
// of the stub's additions makes none of them lose a count.
func TestTallyNoRecords(t *testing.T) {
	t.Parallel()
	exe := tallyBin(t)
	const threads, n = 8, 100000
	r := probe(t, "run", "-v", "--ring-size", "4", "p:t/c f c=%di:s8 => count:tid hist:c", "--", exe, fmt.Sprint(threads), fmt.Sprint(n))
	if r.code != 0 || !strings.Contains(r.stderr, "probe: t/c: in-process, counted in the tracee\n") {
		t.Fatalf("probe run: %v", r)
	}
	if strings.Contains(r.stdout, "lost") {
		t.Errorf("lost counts:\n%s", r.stdout)
	}
	head := fmt.Sprintf("# count:tid of t/c: %d hits, %d keys\n", threads*n, threads)
	rows := regexp.MustCompile(fmt.Sprintf(`(?m)^tid=\d+ +%d \|`, n)).FindAllString(r.stdout, -1)
	if !strings.Contains(r.stdout, head) || len(rows) != threads {
		t.Fatalf("want %q and %d rows of %d hits; got\n%s", head, threads, n, r.stdout)
	}
	if want := fmt.Sprintf("# hist:c of t/c (log2): %d values, ", threads*n); !strings.Contains(r.stdout, want) {
		t.Errorf("no %q in\n%s", want, r.stdout)
	}

	// seq signals: the handler calls work() while the main thread is
	// anywhere, in the stub's additions too.
	seq := seqBin(t)
	r = probe(t, "run", "-v", "p:work => count", "--", seq, "signals", "200000")
	m := regexp.MustCompile(`(?m)^main=(\d+) handled=(\d+)$`).FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || !strings.Contains(r.stderr, "probe/p_work_0: in-process, counted in the tracee\n") {
		t.Fatalf("probe run: %v", r)
	}
	main, _ := strconv.Atoi(m[1])
	handled, _ := strconv.Atoi(m[2])
	if want := fmt.Sprintf("# count of probe/p_work_0: %d hits, 1 key\n", main+handled); !strings.Contains(r.stdout, want) || handled < 1000 {
		t.Fatalf("want %q (main %d, handled %d, at least 1000); got\n%s", want, main, handled, r.stdout)
	}
}

// TestTallyPaths: what is not counted in the tracee records (a filter,
// a printing probe at the same site, a hist of memory, a linear hist)
// and still counts the same.
func TestTallyPaths(t *testing.T) {
	t.Parallel()
	exe := tallyBin(t)
	out := filepath.Join(t.TempDir(), "trace")
	r := probe(t, "run", "-v", "-o", out,
		"p:t/f f x=%dx if x < 100 => count",
		"p:g/lin f x=%dx => hist:x:linear=10000",
		"p:g/mem f s=+0(%sp):u64 => hist:s",
		"p:g/cnt f => count", "p:g/print f x=%dx if x == 7",
		"--", exe, "2", "20000")
	if r.code != 0 {
		t.Fatalf("probe run: %v", r)
	}
	for ev, want := range map[string]string{
		"t/f": "in-process", "g/lin": "in-process", "g/mem": "in-process", "g/cnt": "in-process", "g/print": "in-process",
	} {
		if !strings.Contains(r.stderr, "probe: "+ev+": "+want+"\n") {
			t.Errorf("%s: want %q in\n%s", ev, want, r.stderr)
		}
	}
	b, _ := os.ReadFile(out)
	trace := string(b)
	for _, want := range []string{
		"# count of t/f: 200 hits, 1 key\n",
		"# hist:x:linear=10000 of g/lin (linear, step 10000): 40000 values, sum 399980000\n",
		"# hist:s of g/mem (log2): 40000 values, ",
		"# count of g/cnt: 40000 hits, 1 key\n",
		") x=0x7\n",
	} {
		if !strings.Contains(trace, want) {
			t.Errorf("no %q in\n%s", want, trace)
		}
	}
	if n := strings.Count(trace, ": print: "); n != 2 {
		t.Errorf("g/print: %d events, want 2", n)
	}
}
