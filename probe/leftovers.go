package probe

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/probedbg/probe/singlestep"
)

// Leftovers of a probe killed before it could detach (kill -9): text
// still patched, with int3s and with jumps into its out-of-line pages.
// Its pages and rings stay mapped (nothing unmaps them), so a thread in
// a stub, or coming back through its in-process trampoline, still finds
// what it needs; but the text was refused by every later attach ("code
// in memory differs from the file"), and an int3 left there kills the
// program at its next hit. At attach, where a probe's memory file is
// mapped in the process (/memfd:probe: a probe had rings or a mailbox
// here), every place in the modules' text that differs from the file and
// is one of ours gets the file's bytes back, the threads held: an int3
// (arm64: brk) at an instruction, a direct branch whose target is in an
// anonymous executable mapping. A live patch's jump (into a library
// mapped from a file) is not ours to undo, and is left alone.

// mapsSummary is what restoreLeftovers needs of /proc/PID/maps.
type mapsSummary struct {
	marked bool        // a probe's memory file is mapped
	anonX  [][2]uint64 // anonymous executable mappings: out-of-line pages
	fileX  [][2]uint64 // executable mappings of files: text
	// rwPrivate are readable, writable private mappings: stacks.
	rwPrivate [][2]uint64
	exec      [][2]uint64 // every executable mapping
}

func readMapsSummary(pid int) (mapsSummary, error) {
	var ms mapsSummary
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return ms, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		path := strings.Join(fields[5:], " ")
		if fields[1][2] == 'x' {
			ms.exec = append(ms.exec, [2]uint64{start, end})
		}
		if strings.HasPrefix(fields[1], "rw") && fields[1][3] == 'p' {
			ms.rwPrivate = append(ms.rwPrivate, [2]uint64{start, end})
		}
		switch {
		case strings.HasPrefix(path, "/memfd:probe "):
			ms.marked = true
		case fields[1][2] != 'x':
		case path == "":
			ms.anonX = append(ms.anonX, [2]uint64{start, end})
		case strings.HasPrefix(path, "/"):
			ms.fileX = append(ms.fileX, [2]uint64{start, end})
		}
	}
	return ms, sc.Err()
}

func (ms *mapsSummary) inAnonX(addr uint64) bool { return inRanges(ms.anonX, addr) }

func inRanges(rs [][2]uint64, addr uint64) bool {
	for _, r := range rs {
		if addr >= r[0] && addr < r[1] {
			return true
		}
	}
	return false
}

// textPatch is a run of text to put back: the file's bytes at addr.
type textPatch struct {
	addr uint64
	orig []byte
}

// restoreLeftovers puts back the text an earlier probe left patched, and
// says so; called at attach, before any probe goes in.
func (t *Tracer) restoreLeftovers() {
	ms, err := readMapsSummary(t.pid)
	if err != nil || !ms.marked {
		return
	}
	var patches []textPatch
	for _, r := range ms.fileX {
		patches = append(patches, t.leftoversIn(&ms, r[0], r[1])...)
	}
	if len(patches) == 0 {
		return
	}
	t.holdForInstall()
	done := 0
	for _, p := range patches {
		if _, err := t.proc.WriteAt(p.orig, int64(p.addr)); err == nil {
			done++
		}
	}
	fmt.Fprintf(os.Stderr, "probe: pid %d: put back %d places in its text that an earlier probe left patched (killed before it could detach)\n", t.pid, done)
}

// leftoversIn finds our leftovers in the text mapped at [start, end).
func (t *Tracer) leftoversIn(ms *mapsSummary, start, end uint64) []textPatch {
	m := t.space.ModuleAt(start)
	if m == nil {
		return nil
	}
	size := m.FileBytesAt(start-m.Bias, end-start)
	if size == 0 {
		return nil
	}
	file, err := m.ReadCode(start-m.Bias, size)
	if err != nil {
		return nil
	}
	mem := make([]byte, size)
	if n, _ := t.proc.ReadAt(mem, int64(start)); uint64(n) != size {
		return nil
	}
	var patches []textPatch
	put := func(from, to int) {
		patches = append(patches, textPatch{start + uint64(from), file[from:to]})
	}
	brk := singlestep.BreakpointInsn
	for i := 0; i < len(mem); i++ {
		if mem[i] == file[i] {
			continue
		}
		at := i - i%singlestep.InsnAlign
		if bytes.HasPrefix(mem[at:], brk) && !bytes.HasPrefix(file[at:], brk) {
			put(at, at+len(brk))
			i = at + len(brk) - 1
			continue
		}
		for k := at; k >= max(0, at-singlestep.BranchReach); k-- {
			if target, n, ok := singlestep.DirectBranch(mem[k:], start+uint64(k)); ok && k+n > i && ms.inAnonX(target) {
				put(k, k+n)
				i = k + n - 1
				break
			}
		}
	}
	return patches
}
