package integration

import (
	"path/filepath"
	"testing"
)

// Tests of the process lifecycle under probes: children, syscalls,
// signals and thread churn. Each builds its own tracee from
// testdata/lifecycle.

// lifecycleBin builds testdata/lifecycle/NAME.c with v's flags.
func lifecycleBin(t *testing.T, name string, v variant) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), name)
	src, _ := filepath.Abs(filepath.Join("testdata", "lifecycle", name+".c"))
	if err := build(filepath.Dir(exe), "gcc", append(v.flags(), "-o", exe, src)...); err != nil {
		t.Fatal(err)
	}
	return exe
}

// TestForkChildrenNotFollowed: children of a probed process (fork, vfork,
// posix_spawn) run the probed code and finish exactly as untraced, a fork
// child returning through its copy of a hijacked return address; the
// parent's hits are exact and only the parent's.
func TestForkChildrenNotFollowed(t *testing.T) {
	t.Parallel()
	for _, v := range []variant{o0pie, o2nopie} {
		t.Run(v.String(), func(t *testing.T) {
			t.Parallel()
			exe := lifecycleBin(t, "forks", v)
			const rounds = 3
			evs := traced(t, nil, []string{"p:work", "r:spawn"}, exe, "3")
			got := countByName(evs)
			// The parent calls work 3 times before forking, once after.
			if got["p_work_0"] != 4 || got["r_spawn_0"] != rounds || len(got) != 2 {
				t.Errorf("hits %v, want p_work_0:4 r_spawn_0:%d", got, rounds)
			}
			if tids := countByTID(evs); len(tids) != 1 {
				t.Errorf("events from %v, want the parent only", tids)
			}
			for _, e := range evs {
				if e.name == "r_spawn_0" && e.retFunc != "spawn" {
					t.Errorf("return event %q, want one from spawn", e.line)
				}
			}
		})
	}
}
