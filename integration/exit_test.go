package integration

import (
	"path/filepath"
	"testing"
)

// TestGraphThreadExit: a thread that calls pthread_exit inside traced
// calls exits as it would untraced (the unwinder must not trip on the
// trampoline); its calls are closed as lost, in order, and counted.
func TestGraphThreadExit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	exe := filepath.Join(dir, "texit")
	src, _ := filepath.Abs(filepath.Join("testdata", "tracers", "texit.c"))
	if err := build(dir, "gcc", "-O0", "-g", "-pthread", "-o", exe, src); err != nil {
		t.Fatal(err)
	}
	tf, _ := runTraced(t, []string{"--tracer", "function_graph", "--filter", "thread,outer,inner"}, exe)
	gl := parseGraph(t, tf.section(t, "function_graph"))
	threads, procs := byThread(gl)
	if len(procs) != 1 {
		t.Fatalf("lines of threads %q, want the exiting one only", procs)
	}
	lines := threads[procs[0]]
	if open := checkNesting(t, "exiting thread", lines); len(open) > 0 {
		t.Errorf("calls never closed: %q", open)
	}
	wantGraph(t, "exiting thread", rendered(lines), []string{
		"thread() {",
		"  outer() {",
		"    inner() {",
		"    } /* inner: return lost */",
		"  } /* outer: return lost */",
		"} /* thread: return lost */",
	})
	tf.wantNotes(t, 3, false)
}
