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

// readExactLayout reads the functions and labels of forms.S from the
// symbol table and their instructions from objdump.
func readExactLayout(t testing.TB, path string) *exactLayout {
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
	l := &exactLayout{}
	type mark struct {
		name string
		addr uint64
	}
	var marks []mark
	for _, s := range syms {
		switch {
		case elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 &&
			(strings.HasPrefix(s.Name, "x_") || strings.HasPrefix(s.Name, "h_") || strings.HasPrefix(s.Name, "ra_")):
			l.funcs = append(l.funcs, &exactFunc{name: s.Name, addr: s.Value, size: s.Size})
		case labelRE.MatchString(s.Name):
			marks = append(marks, mark{s.Name, s.Value})
		}
	}
	sort.Slice(l.funcs, func(i, j int) bool { return l.funcs[i].addr < l.funcs[j].addr })
	in := func(a uint64) *exactFunc {
		for _, fn := range l.funcs {
			if fn.addr <= a && a < fn.addr+fn.size {
				return fn
			}
		}
		return nil
	}
	for _, m := range marks {
		fn := in(m.addr)
		if fn == nil {
			t.Fatalf("%s: label %s at %#x is in no form", path, m.name, m.addr)
		}
		g := labelRE.FindStringSubmatch(m.name)
		per := 1
		switch g[1] {
		case "":
		case "n":
			per = 0
		default:
			per, _ = strconv.Atoi(g[1])
		}
		l.labels = append(l.labels, exactLabel{name: g[2], fn: fn, off: m.addr - fn.addr, perIter: per})
	}
	sort.Slice(l.labels, func(i, j int) bool { return l.labels[i].fn.addr+l.labels[i].off < l.labels[j].fn.addr+l.labels[j].off })

	out, err := exec.Command("objdump", "-d", "--no-show-raw-insn", path).Output()
	if err != nil {
		t.Fatalf("objdump %s: %v", path, err)
	}
	insnRE := regexp.MustCompile(`^\s*([0-9a-f]+):\s+(\S.*)$`)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := insnRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		a, _ := strconv.ParseUint(m[1], 16, 64)
		if fn := in(a); fn != nil {
			fn.insns = append(fn.insns, exactInsn{off: a - fn.addr, text: strings.Join(strings.Fields(m[2]), " ")})
		}
	}
	for _, fn := range l.funcs {
		if len(fn.insns) == 0 {
			t.Fatalf("objdump %s: no instructions in %s", path, fn.name)
		}
	}
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
// those at the locations in skip (and ud2, which cannot be probed),
// fetching every register, and the word on top of the stack when top is
// set; with returns, a return probe on every x_ and h_ function too.
func (l *exactLayout) exactSpecs(skip map[string]bool, top, returns bool) []string {
	args := exactRegs
	if top {
		args += " s0=+0(%sp):x64"
	}
	var specs []string
	for _, fn := range l.funcs {
		for _, in := range fn.insns {
			if skip[fn.loc(in.off)] || in.text == "ud2" {
				continue
			}
			specs = append(specs, fmt.Sprintf("p:%s+%#x %s", fn.name, in.off, args))
		}
		if returns && !strings.HasPrefix(fn.name, "ra_") && !skip["r:"+fn.name] {
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
