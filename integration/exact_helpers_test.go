package integration

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The exact tracee (testdata/exact): its forms, the instructions in them,
// the labels that name the instructions under test, and the events a
// trace of it gives, normalised so that runs can be compared line by line.

var exactTracee struct {
	once sync.Once
	path string
	err  error
}

// exactBin returns the path of the exact tracee, building it on first use
// (non-PIE, so that code and data addresses are the same in every run).
func exactBin(t testing.TB) string {
	t.Helper()
	exactTracee.once.Do(func() {
		out := filepath.Join(binDir, "exact")
		if err := os.MkdirAll(out, 0o755); err != nil {
			exactTracee.err = err
			return
		}
		src, err := filepath.Abs(filepath.Join("testdata", "exact"))
		if err != nil {
			exactTracee.err = err
			return
		}
		exactTracee.path = filepath.Join(out, "exact")
		exactTracee.err = build(out, "gcc", "-O2", "-g", "-pthread", "-Wall", "-fno-pie", "-no-pie",
			"-o", exactTracee.path, filepath.Join(src, "exact.c"), filepath.Join(src, "forms.S"))
	})
	if exactTracee.err != nil {
		t.Fatalf("building the exact tracee: %v", exactTracee.err)
	}
	return exactTracee.path
}

// exactFunc is a function of forms.S: a form (x_), a helper (h_) or a
// helper reading its own return address (ra_).
type exactFunc struct {
	name       string
	addr, size uint64
	insns      []exactInsn
}

// exactInsn is one instruction of a function.
type exactInsn struct {
	off  uint64
	text string // objdump's disassembly
}

// loc is the location an event at off in f shows.
func (f *exactFunc) loc(off uint64) string {
	return fmt.Sprintf("%s+%#x/%#x", f.name, off, f.size)
}

// exactLabel names an instruction under test. perIter is how many times
// one iteration of the tracee (every form called once) executes it, or 0
// when the tracee reports the total as "hits NAME K".
type exactLabel struct {
	name    string // without the at_/atK_/atn_ prefix
	fn      *exactFunc
	off     uint64
	perIter int
}

func (l exactLabel) loc() string { return l.fn.loc(l.off) }

// exactLayout is what the tests probe in the tracee.
type exactLayout struct {
	funcs  []*exactFunc // by address
	labels []exactLabel // by address
}

var labelRE = regexp.MustCompile(`^at(\d*|n)_(\w+)$`)

// readFuncs reads the functions of the ELF file path that keep wants
// from its symbol table, and their instructions from objdump; it returns
// them by address, with the whole symbol table.
func readFuncs(t testing.TB, path string, keep func(name string) bool) ([]*exactFunc, []elf.Symbol) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var funcs []*exactFunc
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 && keep(s.Name) {
			funcs = append(funcs, &exactFunc{name: s.Name, addr: s.Value, size: s.Size})
		}
	}
	sort.Slice(funcs, func(i, j int) bool { return funcs[i].addr < funcs[j].addr })
	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", path).Output()
	if err != nil {
		t.Fatalf("objdump %s: %v", path, err)
	}
	insnRE := regexp.MustCompile(`^\s*([0-9a-f]+):\s+(\S.*)$`)
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := insnRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		a, _ := strconv.ParseUint(m[1], 16, 64)
		if fn := funcAt(funcs, a); fn != nil {
			fn.insns = append(fn.insns, exactInsn{off: a - fn.addr, text: strings.Join(strings.Fields(m[2]), " ")})
		}
	}
	for _, fn := range funcs {
		if len(fn.insns) == 0 {
			t.Fatalf("objdump %s: no instructions in %s", path, fn.name)
		}
	}
	return funcs, syms
}

// funcAt returns the function of funcs (by address) that holds a.
func funcAt(funcs []*exactFunc, a uint64) *exactFunc {
	i := sort.Search(len(funcs), func(i int) bool { return funcs[i].addr+funcs[i].size > a })
	if i < len(funcs) && funcs[i].addr <= a {
		return funcs[i]
	}
	return nil
}

// readExactLayout reads the functions and labels of forms.S.
func readExactLayout(t testing.TB, path string) *exactLayout {
	t.Helper()
	l := &exactLayout{}
	var syms []elf.Symbol
	l.funcs, syms = readFuncs(t, path, func(name string) bool {
		return strings.HasPrefix(name, "x_") || strings.HasPrefix(name, "h_") || strings.HasPrefix(name, "ra_")
	})
	for _, s := range syms {
		g := labelRE.FindStringSubmatch(s.Name)
		if g == nil {
			continue
		}
		fn := funcAt(l.funcs, s.Value)
		if fn == nil {
			t.Fatalf("%s: label %s at %#x is in no form", path, s.Name, s.Value)
		}
		per := 1
		switch g[1] {
		case "":
		case "n":
			per = 0
		default:
			per, _ = strconv.Atoi(g[1])
		}
		l.labels = append(l.labels, exactLabel{name: g[2], fn: fn, off: s.Value - fn.addr, perIter: per})
	}
	sort.Slice(l.labels, func(i, j int) bool { return l.labels[i].fn.addr+l.labels[i].off < l.labels[j].fn.addr+l.labels[j].off })
	for _, lb := range l.labels {
		found := false
		for _, in := range lb.fn.insns {
			found = found || in.off == lb.off
		}
		if !found {
			t.Fatalf("label %s (%s) is not on an instruction boundary", lb.name, lb.loc())
		}
	}
	if len(l.funcs) < 50 || len(l.labels) < 100 {
		t.Fatalf("%s: only %d forms and %d labels; is forms.S linked in?", path, len(l.funcs), len(l.labels))
	}
	return l
}

// label returns the label named name (without its prefix).
func (l *exactLayout) label(t testing.TB, name string) exactLabel {
	t.Helper()
	for _, lb := range l.labels {
		if lb.name == name {
			return lb
		}
	}
	t.Fatalf("no label %q in forms.S", name)
	return exactLabel{}
}

// exactRegs are the fetch-args of every probe: all the general registers
// and the flags, by their kernel names.
const exactRegs = "ax=%ax bx=%bx cx=%cx dx=%dx si=%si di=%di bp=%bp sp=%sp r8=%r8 r9=%r9 r10=%r10 r11=%r11 r12=%r12 r13=%r13 r14=%r14 r15=%r15 fl=%flags"

// exactSpecs returns a probe on every instruction of every function but
// ud2 (which cannot be probed),
// fetching every register, and the word on top of the stack when top is
// set; with returns, a return probe on every x_ and h_ function too.
func (l *exactLayout) exactSpecs(top, returns bool) []string {
	args := exactRegs
	if top {
		args += " s0=+0(%sp):x64"
	}
	var specs []string
	for _, fn := range l.funcs {
		for _, in := range fn.insns {
			if in.text == "ud2" {
				continue
			}
			specs = append(specs, fmt.Sprintf("p:%s+%#x %s", fn.name, in.off, args))
		}
		if returns && !strings.HasPrefix(fn.name, "ra_") {
			specs = append(specs, fmt.Sprintf("r:%s %s", fn.name, exactRegs))
		}
	}
	return specs
}

// ---------------------------------------------------------------------
// The tracee's report.

// exactReport is what the tracee printed besides its checksums.
type exactReport struct {
	hits                            map[string]int // "hits NAME K"
	faulted, faultAt, faultReturned int
}

var faultLineRE = regexp.MustCompile(`(?m)^fault faulted=(\d+) at_fault=(\d+) returned=(\d+)$`)

func parseExactReport(t testing.TB, stdout string) exactReport {
	t.Helper()
	r := exactReport{hits: map[string]int{}}
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "hits" {
			n, err := strconv.Atoi(f[2])
			if err != nil {
				t.Fatalf("exact: bad line %q", line)
			}
			r.hits[f[1]] = n
		}
	}
	m := faultLineRE.FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("exact: no fault line in\n%s", stdout)
	}
	r.faulted, _ = strconv.Atoi(m[1])
	r.faultAt, _ = strconv.Atoi(m[2])
	r.faultReturned, _ = strconv.Atoi(m[3])
	return r
}

// ---------------------------------------------------------------------
// Events, normalised.

// stackSpan is how far from a thread's first stack pointer a value is
// still taken for a stack address.
const stackSpan = 8 << 20

var hexRE = regexp.MustCompile(`0x[0-9a-f]+`)
var spRE = regexp.MustCompile(` sp=(0x[0-9a-f]+)`)

// exactThreads returns the events of each thread, in order, as
// "NAME (LOC) ARGS" with the timestamp, CPU, comm and tid left out and
// every stack address written relative to the thread's first stack
// pointer ("S+0x18"), so that the lines of two runs compare equal when
// the tracee did the same. Threads are ordered by their first event.
func exactThreads(t testing.TB, evs []event) [][]string {
	t.Helper()
	byTid := map[int]int{}
	var threads [][]string
	var bases []uint64
	for _, e := range evs {
		i, ok := byTid[e.tid]
		if !ok {
			m := spRE.FindStringSubmatch(e.rest)
			if m == nil {
				t.Fatalf("event without sp=: %q", e.line)
			}
			base, _ := strconv.ParseUint(m[1][2:], 16, 64)
			i = len(threads)
			byTid[e.tid] = i
			threads = append(threads, nil)
			bases = append(bases, base)
		}
		base := bases[i]
		rest := hexRE.ReplaceAllStringFunc(e.rest, func(h string) string {
			v, err := strconv.ParseUint(h[2:], 16, 64)
			if err != nil {
				return h
			}
			switch d := int64(v - base); {
			case d >= 0 && d < stackSpan:
				return fmt.Sprintf("S+%#x", d)
			case d < 0 && d > -stackSpan:
				return fmt.Sprintf("S-%#x", -d)
			}
			return h
		})
		threads[i] = append(threads[i], e.name+" ("+e.loc+")"+rest)
	}
	return threads
}

// firstDiff describes where two event sequences part, or returns "".
func firstDiff(a, b []string, aName, bName string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			from := max(0, i-3)
			var sb strings.Builder
			fmt.Fprintf(&sb, "event %d of %d/%d differs; before it:\n", i, len(a), len(b))
			for _, l := range a[from:i] {
				fmt.Fprintf(&sb, "    %s\n", l)
			}
			fmt.Fprintf(&sb, "  %s: %s\n  %s: %s", aName, a[i], bName, b[i])
			return sb.String()
		}
	}
	if len(a) != len(b) {
		return fmt.Sprintf("%s has %d events, %s %d (equal up to the shorter)", aName, len(a), bName, len(b))
	}
	return ""
}

// ---------------------------------------------------------------------
// The Go tracee.

var goExactTracee struct {
	once sync.Once
	path string
	err  error
}

// goExactBin returns the path of testdata/exact/goexact, built on first use.
func goExactBin(t testing.TB) string {
	t.Helper()
	goExactTracee.once.Do(func() {
		goExactTracee.path = filepath.Join(binDir, "exact", "goexact")
		goExactTracee.err = build(repoRoot, "go", "build", "-o", goExactTracee.path, "./integration/testdata/exact/goexact")
	})
	if goExactTracee.err != nil {
		t.Fatalf("building goexact: %v", goExactTracee.err)
	}
	return goExactTracee.path
}

// goExactFuncs are the functions of goexact that are probed; goexact
// prints how many times each was called.
var goExactFuncs = []string{"main.drive", "main.leaf", "main.frame", "main.rec", "main.add", "main.sub", "main.mul", "main.sq.area", "main.tri.area", "main.sw"}

var jbeRE = regexp.MustCompile(`^jbe [0-9a-f]+ <(.+)\+0x([0-9a-f]+)>$`)

// goStackCheck returns the offsets of the stack check a Go function
// starts with (up to its jbe) and of the morestack call it branches to
// (the jbe's target to the end), and the offset of the first instruction
// after the check: the body, which runs once per call. A goroutine may
// go through the check more than once per call (sysmon asks for
// preemption through the stack guard, at any time), so those offsets are
// probed but their events are not compared.
func (f *exactFunc) goStackCheck() (check map[uint64]bool, body uint64) {
	check = map[uint64]bool{}
	for i, in := range f.insns {
		if i > 3 {
			break
		}
		m := jbeRE.FindStringSubmatch(in.text)
		if m == nil || m[1] != f.name {
			continue
		}
		target, _ := strconv.ParseUint(m[2], 16, 64)
		for j, in2 := range f.insns {
			if j <= i || in2.off >= target {
				check[in2.off] = true
			}
		}
		return check, f.insns[i+1].off
	}
	return check, 0
}

// goExactEvents returns the events as "NAME (LOC) ARGS" in the order they
// happened, but for those at a stack check.
func goExactEvents(evs []event, funcs []*exactFunc) []string {
	skip := map[string]bool{}
	for _, f := range funcs {
		check, _ := f.goStackCheck()
		for off := range check {
			skip[f.loc(off)] = true
		}
	}
	var out []string
	for _, e := range evs {
		if !skip[e.loc] {
			out = append(out, e.name+" ("+e.loc+")"+e.rest)
		}
	}
	return out
}

var goCallsRE = regexp.MustCompile(`(main\.[\w.]+)=(\d+)`)

// goExactCalls parses goexact's "calls main.leaf=N ..." line.
func goExactCalls(t testing.TB, stdout string) map[string]int {
	t.Helper()
	calls := map[string]int{}
	for _, line := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(line, "calls ") {
			for _, m := range goCallsRE.FindAllStringSubmatch(line, -1) {
				calls[m[1]], _ = strconv.Atoi(m[2])
			}
		}
	}
	for _, fn := range goExactFuncs {
		if calls[fn] == 0 {
			t.Fatalf("goexact: no calls of %s in\n%s", fn, stdout)
		}
	}
	return calls
}
