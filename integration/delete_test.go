package integration

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDeleteOnCommandLine: -:EVENT among the specs deletes the event a
// spec before it defined (it was refused as an unknown flag); the
// trace has only the events that stay.
func TestDeleteOnCommandLine(t *testing.T) {
	t.Parallel()
	exe := builtOnce(t, "counter", filepath.Join("..", "examples", "counter.c"), "-O2", "-g", "-pthread")
	r := probe(t, "run", "p:work i", "-:p_work_0", "-v", "r:work $retval", "--", exe, "1", "2")
	_, evs, _ := splitOutput(r.stdout)
	names := countByName(evs)
	if r.code != 0 || names["r_work_0"] != 2 || len(names) != 1 || !strings.Contains(r.stdout, "threads=2 calls=1") {
		t.Fatalf("want exit 0 and 2 r_work_0 events alone; got %v, %v", names, r)
	}
}
