package probe

import (
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
)

// allocator matches the allocator's entry points, in any module: a
// program's own (jemalloc, tcmalloc) takes its lock there too. dlopen
// allocates: a thread stopped inside one holds a lock that is not
// recursive (it would wait on itself for ever), or, in a glibc process
// with one thread, which takes none, has the heap half changed.
var allocator = regexp.MustCompile(`^(__libc_)?(malloc|free|cfree|calloc|realloc|reallocarray|memalign|posix_memalign|aligned_alloc|valloc|pvalloc)$`)

// libcUnsafe matches the C library's functions in the middle of which it
// cannot be called into for dlopen: the allocator's inner parts, the
// loader's (its lists half made), fork's and exit's (they hold the
// allocator's, atfork's and exit's locks).
var libcUnsafe = regexp.MustCompile(`^(_int_|_mid_memalign|malloc_|__malloc_|tcache|arena_|sysmalloc|ptmalloc_|mtrim|munmap_chunk|_dl_|__dl|__libc_dl|dlopen|dlmopen|dlclose|dlsym|dlvsym|fork|_Fork|__libc_fork|exit|__run_exit_handlers|__cxa_finalize)`)

// unsafeToCall says why stopped thread tid cannot be made to call dlopen
// or dlclose now (a frame of its stack is in the dynamic loader, in an
// allocator, or in a function of the C library in the middle of which it
// cannot be called into), or "" when it can. Other threads keep running
// during the call: a lock one of them holds is let go in time.
func (t *Tracer) unsafeToCall(tid int) string {
	var regs unix.PtraceRegs
	if err := t.proc.GetRegs(tid, &regs); err != nil {
		return "" // gone: the call fails and says so
	}
	frames, _ := (&Hit{tracer: t, Tid: tid, regs: &regs}).walk(maxPatchFrames)
	for i, f := range frames {
		pc := f.PC
		if i > 0 {
			pc-- // a return address: the call is before it
		}
		m := t.space.ModuleAt(pc)
		if m == nil {
			continue
		}
		if strings.HasPrefix(m.Name, "ld-") {
			return fmt.Sprintf("is in the dynamic loader (%s)", f.Text)
		}
		sym, ok := m.SymbolAt(pc - m.Bias)
		libc := strings.HasPrefix(m.Name, "libc.so") || strings.HasPrefix(m.Name, "libc-")
		if ok && (allocator.MatchString(sym.Name) || libc && libcUnsafe.MatchString(sym.Name)) {
			return fmt.Sprintf("is in %s (%s)", sym.Name, f.Text)
		}
	}
	return ""
}
