package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// The hot path, as bench/run.sh measures it, under go test -bench:
// bench/work.c calls leaf() b.N times under probe, and each benchmark
// reports the cost per hit (the run's time less that of the same run
// with no calls: process start, symbols, install, exit) and its ratio to
// the ptrace floor (bench/floor.c: trap + wait4 + PTRACE_CONT and nothing
// else) measured once in the same process.
//
//	go test ./integration -run '^$' -bench . -benchtime 20000x

var benchTracees struct {
	once        sync.Once
	work, floor string
	err         error
}

// benchBins builds bench/work.c and bench/floor.c as bench/run.sh does.
func benchBins(b *testing.B) (work, floor string) {
	b.Helper()
	benchTracees.once.Do(func() {
		src := filepath.Join(repoRoot, "bench")
		benchTracees.work = filepath.Join(binDir, "bench-work")
		benchTracees.floor = filepath.Join(binDir, "bench-floor")
		if benchTracees.err = build(binDir, "gcc", "-O2", "-o", benchTracees.floor, filepath.Join(src, "floor.c")); benchTracees.err != nil {
			return
		}
		benchTracees.err = build(binDir, "gcc", "-O0", "-g", "-pthread", "-o", benchTracees.work, filepath.Join(src, "work.c"))
	})
	if benchTracees.err != nil {
		b.Fatalf("building the bench tracees: %v", benchTracees.err)
	}
	return benchTracees.work, benchTracees.floor
}

// timeRun runs a command to completion and returns its wall time.
func timeRun(b *testing.B, name string, args ...string) time.Duration {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	args = archArgs(name, args)
	cmd := exec.CommandContext(ctx, name, args...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		b.Fatalf("%s %q: %v\n%s", name, args, err, limit(string(out)))
	}
	return d
}

// fixedCost is the least wall time of a few runs of cmd(0): what a run
// costs besides its hits.
func fixedCost(b *testing.B, cmd func(n int) []string) time.Duration {
	b.Helper()
	best := time.Duration(1 << 62)
	for range 3 {
		c := cmd(0)
		best = min(best, timeRun(b, c[0], c[1:]...))
	}
	return best
}

// perHit runs cmd(n) for n hits and returns the time per hit beyond the
// fixed cost.
func perHit(b *testing.B, cmd func(n int) []string, hits int) float64 {
	b.Helper()
	fixed := fixedCost(b, cmd)
	c := cmd(hits)
	d := timeRun(b, c[0], c[1:]...)
	return float64(max(0, d-fixed)) / float64(hits)
}

// floorCmd runs work under the floor tracer, threads threads calling
// leaf n/threads times each (which traps itself).
func floorCmd(b *testing.B, threads int) func(n int) []string {
	work, floor := benchBins(b)
	return func(n int) []string {
		return []string{floor, work, strconv.Itoa(n / threads), strconv.Itoa(threads), "floor"}
	}
}

var benchFloor struct {
	once sync.Once
	ns   float64
	cmd  func(n int) []string // the variant that gave ns
}

// floorNs is the floor per hit, the better of the tracer on the tracee's
// CPU (taskset -c 0) and on any CPU, as bench/run.sh takes it, and the
// command that measured it.
func floorNs(b *testing.B) (float64, func(n int) []string) {
	b.Helper()
	benchFloor.once.Do(func() {
		const hits = 20000
		any := floorCmd(b, 1)
		benchFloor.ns, benchFloor.cmd = perHit(b, any, hits), any
		if _, err := exec.LookPath("taskset"); err == nil {
			pinned := func(n int) []string { return append([]string{"taskset", "-c", "0"}, any(n)...) }
			if ns := perHit(b, pinned, hits); ns < benchFloor.ns {
				benchFloor.ns, benchFloor.cmd = ns, pinned
			}
		}
	})
	if benchFloor.ns <= 0 {
		b.Fatal("the floor measured no time per hit")
	}
	return benchFloor.ns, benchFloor.cmd
}

// benchProbe runs probe with args on work, b.N hits over threads threads,
// and reports ns/hit and x-floor.
func benchProbe(b *testing.B, threads int, args ...string) {
	work, _ := benchBins(b)
	floor, _ := floorNs(b)
	cmd := func(n int) []string {
		c := append([]string{probeBin, "run", "-o", "/dev/null"}, args...)
		return append(c, "--", work, strconv.Itoa(n/threads), strconv.Itoa(threads))
	}
	report(b, cmd, threads, floor)
}

func report(b *testing.B, cmd func(n int) []string, threads int, floor float64) {
	b.Helper()
	b.StopTimer()
	fixed := fixedCost(b, cmd)
	hits := max(threads, b.N-b.N%threads)
	c := cmd(hits)
	b.StartTimer()
	d := timeRun(b, c[0], c[1:]...)
	b.StopTimer()
	ns := float64(max(0, d-fixed)) / float64(hits)
	b.ReportMetric(ns, "ns/hit")
	b.ReportMetric(ns/floor, "x-floor")
}

// BenchmarkFloor is the floor itself, measured again with b.N hits.
func BenchmarkFloor(b *testing.B) {
	floor, cmd := floorNs(b)
	report(b, cmd, 1, floor)
}

// BenchmarkEntryProbe is an entry probe with two fetch-args (target:
// <= 1.3x the floor).
func BenchmarkEntryProbe(b *testing.B) {
	benchProbe(b, 1, "p:leaf a=%di b=%si")
}

// BenchmarkEntryProbeStopping is the same probe stopping the thread at
// each hit (--no-inprocess), where BenchmarkEntryProbe records in the
// tracee.
func BenchmarkEntryProbeStopping(b *testing.B) {
	benchProbe(b, 1, "--no-inprocess", "p:leaf a=%di b=%si")
}

// BenchmarkReturnProbe is a return probe: an entry hit and a trampoline
// hit per call.
func BenchmarkReturnProbe(b *testing.B) {
	benchProbe(b, 1, "r:leaf $retval")
}

// BenchmarkFunctionGraph is a traced call under function_graph (target:
// <= 2.6x the floor).
func BenchmarkFunctionGraph(b *testing.B) {
	benchProbe(b, 1, "--tracer", "function_graph", "--filter", "leaf")
}

// BenchmarkFunctionGraphStopping is the same, stopping the thread at
// each entry and return (--no-inprocess).
func BenchmarkFunctionGraphStopping(b *testing.B) {
	benchProbe(b, 1, "--no-inprocess", "--tracer", "function_graph", "--filter", "leaf")
}

// BenchmarkEntryProbe4Threads is the entry probe hit by four threads at
// once, per hit (target: <= 1.5x what one thread costs per hit).
func BenchmarkEntryProbe4Threads(b *testing.B) {
	benchProbe(b, 4, "p:leaf a=%di b=%si")
}
