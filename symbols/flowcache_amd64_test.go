package symbols

import (
	"debug/elf"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/probedbg/probe/singlestep"
)

// TestFlowCache: where libc's functions jump, worked out once, is
// written to the cache and read back the same by the next opening of the
// file; a damaged cache file, or one others may write, is not read, and
// a good one is what is read (the checksum names every byte the file
// loads), but for a function of another size.
func TestFlowCache(t *testing.T) {
	tempBranchCache(t)
	const lib = "/lib/x86_64-linux-gnu/libc.so.6"
	m, err := OpenModule(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := map[uint64]*singlestep.FunctionFlow{}
	var funcs []Symbol
	for _, f := range m.Functions() {
		if f.Size == 0 || len(funcs) == 400 {
			continue
		}
		code, err := m.ReadCode(f.Addr, f.Size)
		if err != nil {
			t.Fatal(err)
		}
		flow, err := singlestep.AnalyzeFunction(code, f.Addr, m.ReadTable)
		if err != nil {
			continue // (not cached)
		}
		got, err := m.FunctionFlow(f.Addr, f.Size)
		if err != nil || !reflect.DeepEqual(got, flow) {
			t.Fatalf("%s: %+v, %v; want %+v", f.Name, got, err, flow)
		}
		want[f.Addr] = flow
		funcs = append(funcs, f)
	}
	m.KeepFunctionFlows()
	files, _ := filepath.Glob(filepath.Join(BranchCacheDir, "flows-*"))
	if len(files) != 1 {
		t.Fatalf("cache files %v, want one", files)
	}
	file := files[0]
	// read: what a new opening of the file finds, and whether it came
	// from the cache (nothing to keep after it).
	read := func(what string, fromCache bool, check func(f Symbol, flow *singlestep.FunctionFlow)) {
		t.Helper()
		m, err := OpenModule(lib)
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for _, f := range funcs {
			flow, err := m.FunctionFlow(f.Addr, f.Size)
			if err != nil {
				t.Fatalf("%s: %s: %v", what, f.Name, err)
			}
			check(f, flow)
		}
		if m.flows.added == fromCache {
			t.Fatalf("%s: from the cache %v, want %v", what, !m.flows.added, fromCache)
		}
	}
	same := func(f Symbol, flow *singlestep.FunctionFlow) {
		if !reflect.DeepEqual(flow, want[f.Addr]) {
			t.Fatalf("%s: %+v, want %+v", f.Name, flow, want[f.Addr])
		}
	}
	read("read back", true, same)

	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	bad := slices.Clone(good)
	bad[len(bad)/2] ^= 0x40
	if err := os.WriteFile(file, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	read("damaged", false, same)

	// Other flows, in a good file: read when private and of the same
	// size, not when others may write it.
	other := map[uint64]cachedFlow{}
	for _, f := range funcs {
		other[f.Addr] = cachedFlow{size: f.Size, flow: &singlestep.FunctionFlow{Unknown: []uint64{f.Addr}}}
	}
	other[funcs[0].Addr] = cachedFlow{size: funcs[0].Size + 1, flow: other[funcs[0].Addr].flow}
	if err := os.WriteFile(file, encodeFlowCache(other), 0o600); err != nil {
		t.Fatal(err)
	}
	read("a good file of other flows", false, func(f Symbol, flow *singlestep.FunctionFlow) {
		if f.Addr == funcs[0].Addr {
			same(f, flow) // (another size: analysed anew)
		} else if !reflect.DeepEqual(flow, other[f.Addr].flow) {
			t.Fatalf("%s: %+v, want the file's %+v", f.Name, flow, other[f.Addr].flow)
		}
	})
	if err := os.WriteFile(file, encodeFlowCache(other), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o666); err != nil {
		t.Fatal(err)
	}
	read("a file others may write", false, same)
	for _, cut := range []int{0, 5, len(good) / 2, len(good) - 1} {
		if _, err := decodeFlowCache(good[:cut]); err == nil {
			t.Errorf("a cache file cut at %d read", cut)
		}
	}
}

// TestReadTable: a jump table is read from a segment the program cannot
// write, or from the part of a writable one that is read-only once
// relocated (PT_GNU_RELRO: a table of label addresses), never from the
// rest (what the file holds there may not be what the code reads).
func TestReadTable(t *testing.T) {
	m, err := OpenModule("/lib/x86_64-linux-gnu/libc.so.6")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if len(m.relro) != 1 {
		t.Fatalf("libc's PT_GNU_RELRO: %+v, want one", m.relro)
	}
	relro := m.relro[0]
	var ro, rw bool
	for _, p := range m.loads {
		if p.Flags&elf.PF_W == 0 {
			ro = true
			if _, err := m.ReadTable(p.Vaddr, 4); err != nil {
				t.Errorf("read at %#x: %v", p.Vaddr, err)
			}
			continue
		}
		rw = true
		if p.Vaddr != relro.Vaddr || p.Filesz <= relro.Memsz+8 {
			t.Fatalf("libc's writable segment %+v, its read-only part %+v: want it first, and more after it", p, relro)
		}
		if _, err := m.ReadTable(relro.Vaddr+relro.Memsz-8, 8); err != nil {
			t.Errorf("read at the end of the read-only part: %v", err)
		}
		for _, at := range []uint64{relro.Vaddr + relro.Memsz - 4, p.Vaddr + p.Filesz - 8} {
			if _, err := m.ReadTable(at, 8); err == nil {
				t.Errorf("read at %#x, in the writable part", at)
			}
		}
	}
	if !ro || !rw {
		t.Fatalf("libc's segments: read-only %v, writable %v; want both", ro, rw)
	}
}
