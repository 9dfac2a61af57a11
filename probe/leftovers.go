package probe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/codegen"
	"github.com/probedbg/probe/ring"
	"github.com/probedbg/probe/singlestep"
	"github.com/probedbg/probe/tracee"
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
	files     [][2]uint64 // probe's memory files: rings, mailboxes
}

func readMapsSummary(pid int) (mapsSummary, error) {
	var ms mapsSummary
	maps, err := tracee.ReadMaps(pid)
	for _, m := range maps {
		r := [2]uint64{m.Start, m.End}
		if m.Exec() {
			ms.exec = append(ms.exec, r)
		}
		if strings.HasPrefix(m.Perms, "rw") && strings.HasSuffix(m.Perms, "p") {
			ms.rwPrivate = append(ms.rwPrivate, r)
		}
		switch {
		case m.Path == "/memfd:probe (deleted)":
			ms.marked = true
			ms.files = append(ms.files, r)
		case !m.Exec():
		case m.Path == "":
			ms.anonX = append(ms.anonX, r)
		case strings.HasPrefix(m.Path, "/"):
			ms.fileX = append(ms.fileX, r)
		}
	}
	return ms, err
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

// textPatch is a run of text to put back: the file's bytes at addr, over
// what was there.
type textPatch struct {
	addr          uint64
	orig, patched []byte
}

// restoreLeftovers puts back the text an earlier probe left patched and
// the return addresses it hooked in the tracee (its rings hold them),
// removes its mappings if no thread can reach them any more, and says
// so; called at attach, before any probe goes in.
func (t *Tracer) restoreLeftovers() {
	t.closeLeftoverFiles()
	ms, err := readMapsSummary(t.pid)
	if err != nil || !ms.marked {
		return
	}
	// A live patch (probe patch) is meant to stay: its branch and the
	// XOL area of its trampoline are not leftovers.
	_, live, err := readPatches(t.pid, t.proc)
	if err != nil && !errors.Is(err, errNoMarker) {
		return // what is ours cannot be told
	}
	var patches []textPatch
	for _, r := range ms.fileX {
		for _, p := range t.leftoversIn(&ms, r[0], r[1]) {
			if !slices.ContainsFunc(live, func(lp Patch) bool {
				return p.addr < lp.Addr+uint64(len(lp.Orig)) && lp.Addr < p.addr+uint64(len(p.orig))
			}) {
				patches = append(patches, p)
			}
		}
	}
	old := slices.DeleteFunc(t.leftoverMappings(&ms, patches), func(m mappedRange) bool { return m.holdsTrampoline(live) })
	t.holdForInstall()
	done := 0
	for _, p := range patches {
		if _, err := t.proc.WriteAt(p.orig, int64(p.addr)); err == nil {
			done++
		}
	}
	t.emptyOldTexts(ms.files)
	returns, hooked := t.unhookLeftoverReturns(ms.files, old)
	returns += t.unhookRescuedReturns(ms.files, old)
	keep := t.oldRescue(&ms, old)
	removed := "removed"
	if keep || hooked || t.installHeld == nil || !t.unmapUnreached(t.anchor, append([]int{t.anchor}, t.installHeld...), old) {
		// A thread in them (inside one of its stubs, say, which it
		// leaves at once, the text back): again at the detach.
		t.maps.left, t.maps.leftFiles, removed = old, ms.files, "to be removed at the detach"
	}
	if done+returns > 0 {
		fmt.Fprintf(os.Stderr, "probe: pid %d: put back %d places in its text that an earlier probe left patched (killed before it could detach), %d return addresses it had hooked; its %d mappings %s\n", t.pid, done, returns, len(old), removed)
	}
}

// closeLeftoverFiles closes the descriptors of our memory files that a
// probe killed between its memfd_create in the tracee and the close
// after the mmap left open there.
func (t *Tracer) closeLeftoverFiles() {
	dir := fmt.Sprintf("/proc/%d/fd", t.pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	closed := 0
	for _, e := range entries {
		target, err := os.Readlink(dir + "/" + e.Name())
		fd, nerr := strconv.ParseUint(e.Name(), 10, 31)
		if err != nil || nerr != nil || target != "/memfd:probe (deleted)" && target != "/memfd:"+PatchMarkerName+" (deleted)" {
			continue
		}
		if ret, err := t.proc.InjectSyscall(t.anchor, unix.SYS_CLOSE, fd); err == nil && ret == 0 {
			closed++
		}
	}
	if closed > 0 {
		fmt.Fprintf(os.Stderr, "probe: pid %d: closed %d descriptors of memory files that an earlier probe left open (killed before it could close them)\n", t.pid, closed)
	}
}

// leftoverMappings are an earlier probe's mappings: its memory files,
// and the anonymous executable mappings its XOL areas' first slot names
// (xolMagic), a detour of patches leads into, or its rescue page says
// it was making, still empty (it died before it could name it).
func (t *Tracer) leftoverMappings(ms *mapsSummary, patches []textPatch) []mappedRange {
	var old []mappedRange
	making := map[[2]uint64]bool{}
	for _, r := range ms.files {
		old = append(old, mappedRange{r[0], r[1] - r[0]})
		if isRescuePage(t.proc, r) {
			addr, _ := t.readWord(r[0] + codegen.RescueMaking)
			size, _ := t.readWord(r[0] + codegen.RescueMaking + 8)
			making[[2]uint64{addr, addr + size}] = addr != 0
		}
	}
	head := make([]byte, len(xolMagic))
	for _, r := range ms.anonX {
		n, _ := t.proc.ReadAt(head, int64(r[0]))
		ours := n == len(head) && (bytes.Equal(head, xolMagic[:]) || making[r] && bytes.Equal(head, make([]byte, len(head))))
		for _, p := range patches {
			if target, _, ok := singlestep.DirectBranch(p.patched, p.addr); ok && target >= r[0] && target < r[1] {
				ours = true
			}
		}
		if ours {
			old = append(old, mappedRange{r[0], r[1] - r[0]})
		}
	}
	return old
}

// unhookLeftoverReturns gives back the return addresses the earlier
// probe's in-process hooks swapped, as its rings' shadow stacks list
// them, where the slot still holds an address in its pages (its
// trampoline). hooked: some could not be given back (arm64 keeps them in
// registers or where a function's CFI says; a layout not understood),
// and may still come (arm64: a frame whose thread is gone, or whose
// stack is back above it, will not; else every killed probe's pages
// stayed for good where a thread had exited with a frame hooked).
func (t *Tracer) unhookLeftoverReturns(files [][2]uint64, old []mappedRange) (n int, hooked bool) {
	var ms mapsSummary
	if !returnInSlot {
		var err error
		if ms, err = readMapsSummary(t.pid); err != nil {
			return 0, true
		}
	}
	for _, f := range files {
		l, ok := leftoverLayout(f[1] - f[0])
		if !ok {
			continue
		}
		l.Base = f[0]
		for slot := 0; slot < l.Slots; slot++ {
			base := l.Base + ring.FirstRingOff + uint64(slot)*l.Stride()
			owner, ok1 := t.readWord(base + ring.OwnerOff)
			top, ok2 := t.readWord(base + ring.ShadowTopOff)
			if !ok1 || !ok2 || owner == 0 || uint32(top) == 0 {
				continue
			}
			for i := uint64(0); i < uint64(min(uint32(top), ring.ShadowFrames)); i++ {
				at := base + ring.ShadowOff + i*ring.ShadowFrameSize
				if !returnInSlot {
					// (The slot is the frame's key: sp at the entry.)
					if key, ok := t.readWord(at); !ok || !t.frameGone(int(uint32(owner)), key, &ms) {
						return n, true
					}
					continue
				}
				slotAddr, ok1 := t.readWord(at)
				ret, ok2 := t.readWord(at + 8)
				if !ok1 || !ok2 {
					return n, true
				}
				if w, ok := t.readWord(slotAddr); ok && inAny(old, w) && ret&ring.UnhookedBit == 0 {
					if t.writeWord(slotAddr, ret) {
						n++
					}
				}
			}
		}
	}
	return n, false
}

// leftoverLayout is the ring layout whose mapping is size bytes long, if
// one is: the default count of rings, of a power of two's size.
func leftoverLayout(size uint64) (ring.Layout, bool) {
	l := ring.Layout{Slots: defaultRings}
	if size <= ring.FirstRingOff {
		return l, false
	}
	stride := (size - ring.FirstRingOff) / uint64(l.Slots)
	if stride <= ring.HeaderSize {
		return l, false
	}
	l.RingSize = stride - ring.HeaderSize
	page := uint64(os.Getpagesize())
	return l, l.Check() == nil && (l.Size()+page-1)&^(page-1) == size
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
		patches = append(patches, textPatch{start + uint64(from), file[from:to], mem[from:to]})
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
