package symbols

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/probedbg/probe/internal/varint"
	"github.com/probedbg/probe/singlestep"
)

// The branches of a library are the same at every start, and the sweep
// that finds them was the most of a start (libc's: ~15 ms of a 50 ms
// run). They are kept in a cache file named by a checksum of what the
// sweep reads: the code, its addresses and the entry points it starts
// anew at (BranchTargets.entries, from the symbols, a debug file's
// included). A file rebuilt, patched or given other symbols is swept
// anew. A cache file that is not whole, not ours, or that others may
// write is never read, only written over.
//
// The file: the line "probe-branches 1", the count of branches, each
// (by target) as its target's distance from the one before and its
// source's signed distance from its target (varints), and last the
// CRC-32C of all that.

// BranchCacheDir is where branch targets are cached; "" keeps none. By
// default $XDG_CACHE_HOME/probe/branches (~/.cache/probe/branches); the
// environment's PROBE_NO_CACHE, if set, keeps none.
var BranchCacheDir = func() string {
	if os.Getenv("PROBE_NO_CACHE") != "" {
		return ""
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "probe", "branches")
}()

const branchCacheMagic = "probe-branches 1\n"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// branchKey is the cache file's name for the sweep of code from
// entries: a checksum of them, and the code's size.
func branchKey(code []codeRange, entries []uint64) string {
	h, n := uint32(0), 0
	var word [8]byte
	for _, c := range code {
		binary.LittleEndian.PutUint64(word[:], c.addr)
		h = crc32.Update(h, castagnoli, word[:])
		h = crc32.Update(h, castagnoli, c.code)
		n += len(c.code)
	}
	for _, e := range entries {
		binary.LittleEndian.PutUint64(word[:], e)
		h = crc32.Update(h, castagnoli, word[:])
	}
	return fmt.Sprintf("%08x-%x-%x", h, n, len(entries))
}

// loadBranchCache reads the cached branches of key, if a good cache file
// has them.
func loadBranchCache(key string) ([]singlestep.Branch, error) {
	b, err := readCacheFile(key)
	if err != nil {
		return nil, err
	}
	return decodeBranchCache(b)
}

// readCacheFile returns the bytes of the cache file name, if it is ours
// and private.
func readCacheFile(name string) ([]byte, error) {
	if BranchCacheDir == "" {
		return nil, errNoBranchCache
	}
	f, err := os.Open(filepath.Join(BranchCacheDir, name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || !ownedPrivately(st) || st.Size() > 64<<20 {
		return nil, errBadBranchCache
	}
	return io.ReadAll(f)
}

// ownedPrivately reports whether a file or directory is ours and no one
// else may write it: what another user wrote could make a jump cover a
// branch target.
func ownedPrivately(st os.FileInfo) bool {
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == os.Geteuid() && st.Mode().Perm()&0o022 == 0
}

// storeBranchCache writes bt's branches as key's cache file.
func storeBranchCache(key string, bt *BranchTargets) {
	writeCacheFile(key, encodeBranchCache(bt.branches))
}

// writeCacheFile writes b as the cache file name, whole or not at all (a
// file of its own renamed into place); failures are ignored: the next
// start works it out again.
func writeCacheFile(name string, b []byte) {
	if BranchCacheDir == "" {
		return
	}
	if err := os.MkdirAll(BranchCacheDir, 0o700); err != nil {
		return
	}
	if st, err := os.Stat(BranchCacheDir); err != nil || !st.IsDir() || !ownedPrivately(st) {
		return
	}
	tmp, err := os.CreateTemp(BranchCacheDir, ".new-*")
	if err != nil {
		return
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil && cerr == nil {
		err = os.Rename(tmp.Name(), filepath.Join(BranchCacheDir, name))
	}
	if err != nil {
		os.Remove(tmp.Name())
	}
}

func encodeBranchCache(branches []singlestep.Branch) []byte {
	b := append([]byte(nil), branchCacheMagic...)
	b = binary.AppendUvarint(b, uint64(len(branches)))
	prev := uint64(0)
	for _, br := range branches {
		b = binary.AppendUvarint(b, br.To-prev)
		b = binary.AppendVarint(b, int64(br.From-br.To))
		prev = br.To
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var (
	errNoBranchCache  = errors.New("no branch cache")
	errBadBranchCache = errors.New("damaged branch cache")
)

// openCacheFile checks a cache file's magic line and checksum, and
// returns a reader of what is between them, past its first number, the
// count of its entries.
func openCacheFile(b []byte, magic string) (r *varint.Reader, n uint64, err error) {
	if len(b) < len(magic)+4 || !bytes.HasPrefix(b, []byte(magic)) {
		return nil, 0, errBadBranchCache
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, 0, errBadBranchCache
	}
	r = &varint.Reader{B: body[len(magic):]}
	if n = r.Uvarint(); n > uint64(len(r.B)) {
		return nil, 0, errBadBranchCache
	}
	return r, n, nil
}

func decodeBranchCache(b []byte) ([]singlestep.Branch, error) {
	r, n, err := openCacheFile(b, branchCacheMagic)
	if err != nil {
		return nil, err
	}
	branches := make([]singlestep.Branch, n)
	prev := uint64(0)
	for i := range branches {
		prev += r.Uvarint()
		branches[i] = singlestep.Branch{To: prev, From: prev + uint64(r.Varint())}
	}
	if r.Bad || len(r.B) != 0 {
		return nil, errBadBranchCache
	}
	return branches, nil
}
