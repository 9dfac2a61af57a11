package symbols

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
)

// A program about to be launched is read ahead: its symbols, its call
// frame information and its cached flows, on another goroutine while
// the exec and the dynamic linker run (~2 ms in which the tracer only
// waits); LoadProcess then takes the module instead of opening the file
// again. Reading them after was ~1.5 ms of Lua's start under
// function_graph.

// Preloaded is an executable opened and being read ahead of the process
// that maps it (Preload).
type Preloaded struct {
	mod  *Module
	path string // as /proc/PID/maps names it: absolute, symlinks resolved
	dev  string // devString's
	ino  uint64
	done chan struct{} // closed when the reading ahead is done
}

var preloaded struct {
	mu   sync.Mutex
	list []*Preloaded
}

// Preload opens the ELF file path and reads ahead what a start reads of
// it; LoadProcess takes the module for a process that maps that very
// file (the same device and inode). Call Release once the process is
// loaded, or not to be. It returns nil if path is not an ELF file it can
// open (a script: its interpreter is what runs).
func Preload(path string) *Preloaded {
	real, err := filepath.Abs(path)
	if err == nil {
		real, err = filepath.EvalSymlinks(real)
	}
	if err != nil {
		return nil
	}
	f, err := os.Open(real)
	if err != nil {
		return nil
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		f.Close()
		return nil
	}
	m, err := newModule(f, real, real)
	if err != nil {
		f.Close()
		return nil
	}
	p := &Preloaded{mod: m, path: real, dev: devString(uint64(sys.Dev)), ino: sys.Ino, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		m.LoadSymbols()
		m.Functions()
		m.frameEntries()
		m.cachedFlows()
	}()
	preloaded.mu.Lock()
	preloaded.list = append(preloaded.list, p)
	preloaded.mu.Unlock()
	return p
}

// Release closes p's module if no LoadProcess took it.
func (p *Preloaded) Release() {
	if p == nil {
		return
	}
	preloaded.mu.Lock()
	i := slices.Index(preloaded.list, p)
	if i >= 0 {
		preloaded.list = slices.Delete(preloaded.list, i, i+1)
	}
	preloaded.mu.Unlock()
	if i >= 0 {
		<-p.done // (not closed under its reader)
		p.mod.Close()
	}
}

// takePreloaded returns the module preloaded for the file mf maps, at
// path, and leaves it to the caller; nil if there is none. Its reading
// ahead may still be going on: what it reads is built once, whoever
// asks first.
func takePreloaded(path string, mf *mappedFile) *Module {
	preloaded.mu.Lock()
	defer preloaded.mu.Unlock()
	for i, p := range preloaded.list {
		if p.path == path && p.ino == mf.inode && p.dev == mf.dev {
			preloaded.list = slices.Delete(preloaded.list, i, i+1)
			return p.mod
		}
	}
	return nil
}
