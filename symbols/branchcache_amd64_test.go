package symbols

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/probedbg/probe/singlestep"
)

// tempBranchCache points BranchCacheDir at a new directory for the
// length of the test.
func tempBranchCache(t *testing.T) {
	old := BranchCacheDir
	t.Cleanup(func() { BranchCacheDir = old })
	BranchCacheDir = filepath.Join(t.TempDir(), "branches")
}

// TestBranchCache: libc's branches swept once are written to the cache
// and read back the same; a damaged cache file, or one others may write,
// is swept over again, and a good one is what is read (a file of other
// branches, ours and private, is believed: the checksum names the code).
func TestBranchCache(t *testing.T) {
	tempBranchCache(t)
	m, err := OpenModule("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	swept, err := m.findBranchTargets()
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(BranchCacheDir, "*"))
	if len(files) != 1 || len(swept.branches) < 10000 {
		t.Fatalf("cache files %v after a sweep of %d branches, want one", files, len(swept.branches))
	}
	file := files[0]
	same := func(what string, want []singlestep.Branch) {
		t.Helper()
		bt, err := m.findBranchTargets()
		if err != nil || !slices.Equal(bt.branches, want) || !slices.Equal(bt.entries, swept.entries) {
			t.Fatalf("%s: %d branches (%v), want %d", what, len(bt.branches), err, len(want))
		}
	}
	same("read back", swept.branches)

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
	if err := os.WriteFile(file, encodeBranchCache(other), 0o600); err != nil {
		t.Fatal(err)
	}
	same("a good file of other branches", other)
	if err := os.Chmod(file, 0o666); err != nil {
		t.Fatal(err)
	}
	same("a file others may write", swept.branches)
	for _, cut := range []int{0, 5, len(good) / 2, len(good) - 1} {
		if _, err := decodeBranchCache(good[:cut]); err == nil {
			t.Errorf("a cache file cut at %d read", cut)
		}
	}
}
