package integration

import (
	"regexp"
	"strings"
	"testing"

	"github.com/probedbg/probe/output"
)

// TestHelpAndVersion: probe help lists every format of the table, a line
// each under --format, and probe --version names the build.
func TestHelpAndVersion(t *testing.T) {
	r := probe(t, "help")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("probe help: %v", r)
	}
	_, block, _ := strings.Cut(r.stdout, "  --format F ")
	block, _, _ = strings.Cut(block, "\n  --duration")
	for _, f := range output.Formats {
		if !regexp.MustCompile(`(?m)^ +` + f.Name + ` +` + regexp.QuoteMeta(strings.Split(f.Help, "\n")[0])).MatchString(block) {
			t.Errorf("probe help: no line for format %s under --format:\n%s", f.Name, block)
		}
	}
	for _, line := range strings.Split(r.stdout, "\n") {
		if len(line) > 80 {
			t.Errorf("probe help: a line over 80 characters: %q", line)
		}
	}
	versionRE := regexp.MustCompile(`^probe \S+( [0-9a-f]{12}( \(modified\))?)? go1\.[0-9.]+\S*\n$`)
	for _, arg := range []string{"--version", "version"} {
		if r := probe(t, arg); r.code != 0 || r.stderr != "" || !versionRE.MatchString(r.stdout) {
			t.Errorf("probe %s: want one line: probe VERSION [REVISION] GO, got %v", arg, r)
		}
	}
}
