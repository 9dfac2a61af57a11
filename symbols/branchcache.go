package symbols

import (
	"bytes"
	"crypto/sha256"
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
// run). They are kept, with the entry points the sweep starts anew at
// (BranchTargets.entries, from the symbols, a debug file's included), in
// a cache file named by what the sweep reads: the file and the debug
// file, each by its device, inode, size, and modification and change
// times (fileKey). A hit reads neither the code nor the symbols (libc's,
// from libc6-dbg: ~10 ms of a probe's start on it). A file rebuilt,
// patched or given other symbols is swept anew. A cache file that is not
// whole, not ours, or that others may write is never read, only written
// over.
//
// The file: the line "probe-branches 3" (3: computed gotos' tables read), the count of entry points, each
// as its distance from the one before; the count of branches, each (by
// target) as its target's distance from the one before and its source's
// signed distance from its target (varints); and last the CRC-32C of all
// that.

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

const branchCacheMagic = "probe-branches 3\n"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// branchKey is the name of the module's branch cache file: a hash of
// its file's key and, where its symbols come from a debug file, that
// file's path and key ("" if the file cannot be told apart).
func (m *Module) branchKey() string {
	if m.file == nil {
		return ""
	}
	key, ok := statKey(m.file)
	if !ok {
		return ""
	}
	h := sha256.New()
	fmt.Fprintf(h, "%+v\n", key)
	if m.elf.Section(".symtab") == nil {
		if debug := m.findDebugFile(); debug != "" {
			f, err := os.Open(debug)
			if err != nil {
				return ""
			}
			dkey, ok := statKey(f)
			f.Close()
			if !ok {
				return ""
			}
			fmt.Fprintf(h, "%s %+v\n", debug, dkey)
		}
	}
	return fmt.Sprintf("branches-%x", h.Sum(nil)[:16])
}

// loadBranchCache reads the cached branches of key, if a good cache file
// has them.
func loadBranchCache(key string) (*BranchTargets, error) {
	if key == "" {
		return nil, errNoBranchCache
	}
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
	if key != "" {
		writeCacheFile(key, encodeBranchCache(bt))
	}
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

func encodeBranchCache(bt *BranchTargets) []byte {
	b := append([]byte(nil), branchCacheMagic...)
	b = binary.AppendUvarint(b, uint64(len(bt.entries)))
	prev := uint64(0)
	for _, e := range bt.entries {
		b = binary.AppendUvarint(b, e-prev)
		prev = e
	}
	b = binary.AppendUvarint(b, uint64(len(bt.branches)))
	prev = 0
	for _, br := range bt.branches {
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

func decodeBranchCache(b []byte) (*BranchTargets, error) {
	r, n, err := openCacheFile(b, branchCacheMagic)
	if err != nil {
		return nil, err
	}
	// (Off a local slice, not r: a write barrier a read made it 15x slower.)
	body := r.B
	bt := &BranchTargets{entries: make([]uint64, n)}
	prev := uint64(0)
	for i := range bt.entries {
		d, k := binary.Uvarint(body)
		if k <= 0 {
			return nil, errBadBranchCache
		}
		body = body[k:]
		prev += d
		bt.entries[i] = prev
	}
	n, k := binary.Uvarint(body)
	if k <= 0 || n > uint64(len(body)) {
		return nil, errBadBranchCache
	}
	body = body[k:]
	bt.branches = make([]singlestep.Branch, n)
	prev = 0
	for i := range bt.branches {
		d, k := binary.Uvarint(body)
		if k <= 0 {
			return nil, errBadBranchCache
		}
		from, k2 := binary.Varint(body[k:])
		if k2 <= 0 {
			return nil, errBadBranchCache
		}
		body = body[k+k2:]
		prev += d
		bt.branches[i] = singlestep.Branch{To: prev, From: prev + uint64(from)}
	}
	if len(body) != 0 {
		return nil, errBadBranchCache
	}
	return bt, nil
}
