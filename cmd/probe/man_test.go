package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestManPageCurrent: docs/probe.1 is the help's, as manPage makes it
// (PROBE_UPDATE_MAN=1 writes it).
func TestManPageCurrent(t *testing.T) {
	path := filepath.Join("..", "..", "docs", "probe.1")
	want := manPage()
	if os.Getenv("PROBE_UPDATE_MAN") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != want {
		t.Fatalf("docs/probe.1 is not the help's (%v): PROBE_UPDATE_MAN=1 go test ./cmd/probe -run TestManPageCurrent", err)
	}
}

// TestManPageRenders: man renders docs/probe.1 with no warning, every
// command and flag of the help in it.
func TestManPageRenders(t *testing.T) {
	cmd := exec.Command("man", "--warnings", "-l", "-P", "cat", filepath.Join("..", "..", "docs", "probe.1"))
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "LANG=C.UTF-8")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("man -l docs/probe.1: %v\n%s", err, stderr.String())
	}
	page := strings.Join(strings.Fields(string(out)), " ")
	h := parseHelp(usageText())
	for _, c := range h.commands {
		for _, s := range c.synopsis {
			if !strings.Contains(page, strings.Join(strings.Fields(s), " ")) {
				t.Errorf("the page lacks the command %q", s)
			}
		}
	}
	if len(h.flags) < 30 {
		t.Errorf("%d flags parsed from the help, want them all", len(h.flags))
	}
	for _, f := range h.flags {
		if !strings.Contains(page, strings.TrimSpace(f.name+" "+f.arg)) {
			t.Errorf("the page lacks the flag %s %s", f.name, f.arg)
		}
	}
}

// TestCompletionBash: bash's completion, sourced, completes commands,
// flags, formats and tracers.
func TestCompletionBash(t *testing.T) {
	script, err := completion("bash")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ words, want string }{
		{"probe re", "record report"},
		{"probe --v", "--version"},
		{"probe run --tra", "--tracer"},
		{"probe run --format pe", "perfetto"},
		{"probe record --tracer function", "function function_graph"},
		{"probe attach --no-d", "--no-drop"},
	} {
		words := strings.Fields(c.words)
		sh := script + "COMP_WORDS=(" + strings.Join(words, " ") + "); COMP_CWORD=" +
			strconv.Itoa(len(words)-1) + "; _probe; echo \"${COMPREPLY[*]}\"\n"
		out, err := exec.Command("bash", "-c", sh).Output()
		if got := strings.TrimSpace(string(out)); err != nil || got != c.want {
			t.Errorf("%q: %q (%v), want %q", c.words, got, err, c.want)
		}
	}
	if _, err := completion("tcsh"); err == nil || err.Error() != `completion: unknown shell "tcsh" (want bash, zsh or fish)` {
		t.Errorf("tcsh: %v", err)
	}
}
