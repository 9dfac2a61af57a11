package symbols

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/probedbg/probe/singlestep"
)

// tempBranchCache points BranchCacheDir at a new directory for the
// length of the test.
func tempBranchCache(t *testing.T) {
	old := BranchCacheDir
	t.Cleanup(func() { BranchCacheDir = old })
	BranchCacheDir = filepath.Join(t.TempDir(), "branches")
}

// TestBranchCache: libc's branches and entry points swept once are
// written to the cache and read back the same, without reading its
// symbols; a damaged cache file, or one others may write, is swept over
// again, and a good one is what is read (a file of other branches, ours
// and private, is believed: its name is the file's key); a file changed
// since has another cache file.
func TestBranchCache(t *testing.T) {
	tempBranchCache(t)
	libc := filepath.Join(t.TempDir(), "libc.so.6") // (its debug file is found by its build ID)
	if b, err := os.ReadFile("/lib/x86_64-linux-gnu/libc.so.6"); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(libc, b, 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := OpenModule(libc)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	swept, err := m.findBranchTargets()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(BranchCacheDir, "*"))
	if len(files) != 1 || len(swept.branches) < 10000 || len(swept.entries) < 1000 {
		t.Fatalf("cache files %v after a sweep of %d branches from %d entries, want one", files, len(swept.branches), len(swept.entries))
	}
	file := files[0]
	same := func(what string, want []singlestep.Branch) {
		t.Helper()
		m, err := OpenModule(libc)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		bt, err := m.findBranchTargets()
		if err != nil || !slices.Equal(bt.branches, want) || !slices.Equal(bt.entries, swept.entries) {
			t.Fatalf("%s: %d branches (%v), want %d", what, len(bt.branches), err, len(want))
		}
	}
	same("read back", swept.branches)
	read, err := OpenModule(libc)
	if err != nil {
		t.Fatal(err)
	}
	defer read.Close()
	if _, err := read.findBranchTargets(); err != nil || read.entries != nil {
		t.Errorf("a read of the cache file read the symbols (err %v)", err)
	}

	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(good)
	bad[len(bad)/2] ^= 0x40
	if err := os.WriteFile(file, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	same("damaged", swept.branches)
	if b, _ := os.ReadFile(file); !slices.Equal(b, good) {
		t.Error("the damaged cache file was not written over")
	}

	// Other branches, in a good file: read when private, not when
	// others may write it.
	other := swept.branches[:10]
	if err := os.WriteFile(file, encodeBranchCache(&BranchTargets{entries: swept.entries, branches: other}), 0o600); err != nil {
		t.Fatal(err)
	}
	same("a good file of other branches", other)
	if err := os.Chmod(file, 0o666); err != nil {
		t.Fatal(err)
	}
	same("a file others may write", swept.branches)

	// Changed: the file's times move, and its key with them.
	if err := os.WriteFile(file, encodeBranchCache(&BranchTargets{entries: swept.entries, branches: other}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(libc, time.Time{}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	same("a file changed since", swept.branches)
	if files, _ := filepath.Glob(filepath.Join(BranchCacheDir, "*")); len(files) != 2 {
		t.Errorf("cache files %v, want the old and the changed file's", files)
	}
	for _, cut := range []int{0, 5, len(good) / 2, len(good) - 1} {
		if _, err := decodeBranchCache(good[:cut]); err == nil {
			t.Errorf("a cache file cut at %d read", cut)
		}
	}
}

// TestBranchCacheDebugFile: a stripped library's entry points come from
// its debug file, so a debug file changed since (other symbols) names
// another cache file, and the sweep is made anew.
func TestBranchCacheDebugFile(t *testing.T) {
	tempBranchCache(t)
	_, stripped := strippedLib(t)
	open := func() *Module {
		m, err := OpenModule(stripped)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	m := open()
	if _, err := m.findBranchTargets(); err != nil {
		t.Fatal(err)
	}
	if m.DebugFile() == "" {
		t.Fatal("no debug file found: the test is void")
	}
	key := m.branchKey()
	if again := open().branchKey(); again != key {
		t.Errorf("the same files: key %s, then %s", key, again)
	}
	if err := os.Chtimes(m.DebugFile(), time.Time{}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if changed := open().branchKey(); changed == key || changed == "" {
		t.Errorf("the debug file changed: key %q, before %q", changed, key)
	}
}

// TestBranchTargetsClosedNotShared: a module closed while its branch
// targets were being found (an exec, a dlclose, during a search in the
// background) fails alone: the next module of the file finds them.
func TestBranchTargetsClosedNotShared(t *testing.T) {
	tempBranchCache(t)
	path := buildInto(t)
	m, err := OpenModule(path)
	if err != nil {
		t.Fatal(err)
	}
	m.branchOnce.Do(func() { m.branches = m.sharedBranchSet() }) // (its set is the file's)
	m.Close()
	if _, err := m.BranchTargets(); err == nil {
		t.Fatal("a closed module found its branch targets: the test is void")
	}
	if _, bt := openBranches(t, path); bt == nil || len(bt.entries) == 0 {
		t.Errorf("the next module of %s: %+v", path, bt)
	}
}
