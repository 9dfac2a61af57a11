package probe

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The cost of putting the function tracer on a big program and of taking
// it off again, through the library: go test -bench Install10k ./probe.
// Timings are reported, never asserted (these machines are noisy).

const bigFuncs = 12000

// compileBig writes and compiles the program into dir.
func compileBig(dir string, n int) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(dir string, name string, args ...string) error {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	// Tests run in the package directory: the module root is "..".
	if err := run("..", "go", "run", "./bench/bigc", "-n", strconv.Itoa(n), "-parts", "4", dir); err != nil {
		return "", err
	}
	srcs, _ := filepath.Glob(filepath.Join(dir, "*.c"))
	// The parts in parallel: one file of 12,000 functions takes gcc 6 s.
	errs := make(chan error, len(srcs))
	for _, src := range srcs {
		go func() { errs <- run(dir, "gcc", "-O0", "-g", "-c", src) }()
	}
	var err error
	for range srcs {
		if e := <-errs; e != nil {
			err = e
		}
	}
	if err != nil {
		return "", err
	}
	objs, _ := filepath.Glob(filepath.Join(dir, "*.o"))
	bin := filepath.Join(dir, "big")
	return bin, run(dir, "gcc", append([]string{"-o", bin}, objs...)...)
}

// BenchmarkInstall10k installs the function tracer on the 12,000
// functions of a launched program held at its entry point, then detaches.
// install-ms and remove-ms are per operation.
func BenchmarkInstall10k(b *testing.B) {
	bin, err := compileBig(b.TempDir(), bigFuncs)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("function", func(b *testing.B) { benchInstall(b, bin, FuncTraceOptions{}) })
	b.Run("function_graph", func(b *testing.B) { benchInstall(b, bin, FuncTraceOptions{Returns: true}) })
}

func benchInstall(b *testing.B, bin string, opts FuncTraceOptions) {
	opts.Handler = func(*FuncEvent) {}
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	var install, remove time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		tr, err := Launch([]string{bin}, &LaunchOptions{Stdout: devnull})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		info, err := tr.TraceFunctions(opts)
		t1 := time.Now()
		if err != nil {
			b.Fatal(err)
		}
		if info.Functions < bigFuncs {
			b.Fatalf("traced %d functions, want at least %d (skipped %v)", info.Functions, bigFuncs, info.Skipped[:min(3, len(info.Skipped))])
		}
		if err := tr.Detach(); err != nil {
			b.Fatal(err)
		}
		install += t1.Sub(t0)
		remove += time.Since(t1)
		b.StopTimer()
		tr.Wait()
		b.StartTimer()
	}
	b.ReportMetric(float64(install.Microseconds())/1e3/float64(b.N), "install-ms/op")
	b.ReportMetric(float64(remove.Microseconds())/1e3/float64(b.N), "remove-ms/op")
}
