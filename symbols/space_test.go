package symbols

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// child is a running test program, stopped in read(0).
type child struct {
	pid                  int
	mainAddr, mallocAddr uint64
	stdin                io.WriteCloser
}

// startProg runs path and reads the addresses it prints; the process is
// killed when the test ends.
func startProg(t *testing.T, path string) *child {
	t.Helper()
	cmd := exec.Command(path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("read addresses from %s: %v", path, err)
	}
	c := &child{pid: cmd.Process.Pid, stdin: stdin}
	f := strings.Fields(line)
	if len(f) != 2 {
		t.Fatalf("child printed %q, want two addresses", line)
	}
	for i, p := range []*uint64{&c.mainAddr, &c.mallocAddr} {
		if *p, err = strconv.ParseUint(strings.TrimPrefix(f[i], "0x"), 16, 64); err != nil {
			t.Fatalf("child printed %q: %v", line, err)
		}
	}
	return c
}

func loadTestProcess(t *testing.T, pid int) *Space {
	t.Helper()
	s, err := LoadProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestLoadProcessPIE(t *testing.T) {
	path := buildProg(t, t.TempDir(), "prog", "-fPIE", "-pie")
	c := startProg(t, path)

	begin := time.Now()
	s, err := LoadProcess(c.pid)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, malloc, err := s.Lookup("malloc")
	elapsed := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("LoadProcess + Lookup(malloc): %v (%d modules)", elapsed, len(s.Mapped))
	if elapsed > 250*time.Millisecond {
		t.Errorf("LoadProcess + Lookup took %v; the budget is 50ms", elapsed)
	}

	if s.Pid != c.pid {
		t.Errorf("Pid = %d, want %d", s.Pid, c.pid)
	}
	main := s.Main()
	if main.Name != "prog" || main.Path != path {
		t.Errorf("Main() = %q at %q, want prog at %q", main.Name, main.Path, path)
	}
	mainSym := mustLookup(t, main.Module, "main")
	if main.Bias == 0 {
		t.Error("PIE main executable has bias 0")
	}
	if want := c.mainAddr - mainSym.Addr; main.Bias != want {
		t.Errorf("Main().Bias = %#x, want %#x (runtime main %#x - link %#x)", main.Bias, want, c.mainAddr, mainSym.Addr)
	}
	if got, want := s.Describe(c.mainAddr), fmt.Sprintf("main+0x0/0x%x", mainSym.Size); got != want {
		t.Errorf("Describe(main) = %q, want %q", got, want)
	}
	for _, m := range s.Mapped {
		if strings.HasPrefix(m.Name, "[") || m.Name == "" {
			t.Errorf("Mapped includes %q", m.Name)
		}
	}

	libc, err := s.FindModule("libc")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(libc.Name, "libc.so") && !strings.HasPrefix(libc.Name, "libc-") {
		t.Errorf(`FindModule("libc") = %q`, libc.Name)
	}
	if m, err := s.FindModule(libc.Name); err != nil || m != libc {
		t.Errorf("FindModule(%q) = %v, %v", libc.Name, m, err)
	}
	if m, err := s.FindModule(libc.Path); err != nil || m != libc {
		t.Errorf("FindModule(%q) = %v, %v", libc.Path, m, err)
	}
	// /lib is a symlink to usr/lib on merged-/usr systems; either path names libc.
	if rest, ok := strings.CutPrefix(libc.Path, "/usr/lib/"); ok {
		if other := "/lib/" + rest; fileExists(other) {
			if m, err := s.FindModule(other); err != nil || m != libc {
				t.Errorf("FindModule(%q) = %v, %v", other, m, err)
			}
		}
	}

	mallocMod, sym, err := s.Lookup("malloc")
	if err != nil {
		t.Fatal(err)
	}
	if mallocMod != libc || sym != malloc {
		t.Errorf("Lookup(malloc) = %s %+v, want libc's", mallocMod.Name, sym)
	}
	runtime := sym.Addr + libc.Bias
	if runtime != c.mallocAddr {
		t.Errorf("malloc at runtime %#x (link %#x + bias %#x), the process says %#x", runtime, sym.Addr, libc.Bias, c.mallocAddr)
	}
	if runtime < libc.Start || runtime >= libc.End {
		t.Errorf("malloc %#x outside libc [%#x, %#x)", runtime, libc.Start, libc.End)
	}
	if s.ModuleAt(runtime) != libc {
		t.Errorf("ModuleAt(malloc) = %v, want libc", s.ModuleAt(runtime))
	}
	if got, want := s.Describe(runtime), fmt.Sprintf("malloc+0x0/0x%x", sym.Size); got != want {
		t.Errorf("Describe(malloc) = %q, want %q", got, want)
	}
	if got, want := s.Describe(runtime+3), fmt.Sprintf("malloc+0x3/0x%x", sym.Size); got != want {
		t.Errorf("Describe(malloc+3) = %q, want %q", got, want)
	}
	if got := s.ModuleAt(1); got != nil {
		t.Errorf("ModuleAt(1) = %s, want nil", got.Name)
	}
	if got := s.Describe(1); got != "0x1" {
		t.Errorf("Describe(1) = %q, want 0x1", got)
	}

	// memcpy is an IFUNC in glibc: still a function.
	if _, memcpy, err := s.Lookup("memcpy"); err != nil || !memcpy.Func {
		t.Errorf("Lookup(memcpy) = %+v, %v; want a function", memcpy, err)
	}
	if !inExecMapping(t, c.pid, c.mainAddr) {
		t.Errorf("main at %#x is not in an executable mapping", c.mainAddr)
	}

	// Symbols of the executable come first even when a library has them too.
	if m, _, err := s.Lookup("main"); err != nil || m != main {
		t.Errorf("Lookup(main) = %v, %v; want the executable", m, err)
	}

	// The dynamic loader is mapped too.
	if _, err := s.FindModule("ld-linux-x86-64.so.2"); err != nil && !hasPrefixModule(s, "ld-") {
		t.Errorf("no dynamic loader among %v", moduleNames(s))
	}
}

func hasPrefixModule(s *Space, prefix string) bool {
	return slices.ContainsFunc(s.Mapped, func(m *Mapped) bool { return strings.HasPrefix(m.Name, prefix) })
}

func moduleNames(s *Space) []string {
	var names []string
	for _, m := range s.Mapped {
		names = append(names, m.Name)
	}
	return names
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestLoadProcessNoPIE(t *testing.T) {
	path := buildProg(t, t.TempDir(), "prog", "-fno-PIE", "-no-pie")
	c := startProg(t, path)
	s := loadTestProcess(t, c.pid)
	main := s.Main()
	if main.PIE || main.Bias != 0 {
		t.Errorf("non-PIE Main(): PIE %v, Bias %#x; want false, 0", main.PIE, main.Bias)
	}
	mainSym := mustLookup(t, main.Module, "main")
	if mainSym.Addr != c.mainAddr {
		t.Errorf("link address of main %#x, runtime %#x: should be equal", mainSym.Addr, c.mainAddr)
	}
	work := mustLookup(t, main.Module, "work")
	if got, want := s.Describe(work.Addr+2), fmt.Sprintf("work+0x2/0x%x", work.Size); got != want {
		t.Errorf("Describe(work+2) = %q, want %q", got, want)
	}
	if _, err := s.FindModule("libc"); err != nil {
		t.Error(err)
	}
}

// TestLoadProcessDeletedExecutable: the file behind the process is gone; it
// must be read through /proc/PID rather than skipped or crashed on.
func TestLoadProcessDeletedExecutable(t *testing.T) {
	path := buildProg(t, t.TempDir(), "gone", "-fPIE", "-pie")
	c := startProg(t, path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s := loadTestProcess(t, c.pid)
	main := s.Main()
	if main.Name != "gone" {
		t.Fatalf("Main().Name = %q, want gone (modules %v)", main.Name, moduleNames(s))
	}
	mainSym := mustLookup(t, main.Module, "main")
	if main.Bias != c.mainAddr-mainSym.Addr {
		t.Errorf("Bias = %#x, want %#x", main.Bias, c.mainAddr-mainSym.Addr)
	}
	if m, sym, err := s.Lookup("worker"); err != nil || m != main || sym.Size == 0 {
		t.Errorf("Lookup(worker) = %v %+v %v", m, sym, err)
	}
	if procDir := fmt.Sprintf("/proc/%d/", c.pid); !strings.HasPrefix(main.Path, procDir) {
		t.Errorf("Main().Path = %q, want it opened under %s", main.Path, procDir)
	}
}

// TestLoadProcessDeletedLibrary: a library removed after loading is read
// through /proc/PID/map_files when the kernel allows it.
func TestLoadProcessDeletedLibrary(t *testing.T) {
	dir := t.TempDir()
	path := buildProg(t, dir, "prog", "-fPIE", "-pie")
	libDir := filepath.Join(dir, "lib")
	if err := os.Mkdir(libDir, 0o755); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(libDir, "libother.so")
	run(t, dir, "gcc", "-O0", "-shared", "-fPIC", "-o", lib, "other.c")
	run(t, dir, "gcc", "-O0", "-fPIE", "-pie", "-o", path, "prog.c", "-L"+libDir, "-lother", "-Wl,-rpath,"+libDir)
	c := startProg(t, path)
	if err := os.Remove(lib); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Open(fmt.Sprintf("/proc/%d/map_files/", c.pid)); err != nil {
		t.Fatalf("no map_files: %v", err)
	}
	s := loadTestProcess(t, c.pid)
	other, err := s.FindModule("libother")
	if err != nil {
		t.Fatalf("%v (modules %v)", err, moduleNames(s))
	}
	if !strings.Contains(other.Path, "/map_files/") {
		t.Errorf("deleted library opened as %q, want via map_files", other.Path)
	}
	m, sym, err := s.Lookup("call_twin")
	if err != nil || m != other {
		t.Fatalf("Lookup(call_twin) = %v, %v; want libother", m, err)
	}
	runtime := sym.Addr + other.Bias
	if s.ModuleAt(runtime) != other {
		t.Errorf("ModuleAt(call_twin at %#x) is not libother [%#x, %#x)", runtime, other.Start, other.End)
	}
	// The file is gone, so check the bias against the kernel's own view:
	// the executable mapping must cover call_twin.
	if !inExecMapping(t, c.pid, runtime) {
		t.Errorf("call_twin at %#x is not in an executable mapping", runtime)
	}
	if got, want := s.Describe(runtime), fmt.Sprintf("call_twin+0x0/0x%x", sym.Size); got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

func inExecMapping(t *testing.T, pid int, addr uint64) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	maps, err := parseMaps(strings.NewReader(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range maps {
		if addr >= mp.start && addr < mp.end {
			return strings.Contains(mp.perms, "x")
		}
	}
	return false
}

func TestLoadProcessErrors(t *testing.T) {
	_, err := LoadProcess(0x7ffffff0) // above any pid_max
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadProcess(nonexistent) error %v, want os.ErrNotExist", err)
	}
	if _, err := LoadProcess(-1); err == nil {
		t.Error("LoadProcess(-1) succeeded")
	}
}

func TestLoadBinary(t *testing.T) {
	path := buildProg(t, t.TempDir(), "prog", "-fPIE", "-pie")
	s, err := LoadBinary(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Pid != 0 || len(s.Mapped) != 1 {
		t.Fatalf("LoadBinary: Pid %d, %d modules", s.Pid, len(s.Mapped))
	}
	main := s.Main()
	if main.Name != "prog" || main.Bias != 0 {
		t.Errorf("Main() = %q bias %#x", main.Name, main.Bias)
	}
	m, work, err := s.Lookup("work")
	if err != nil || m != main {
		t.Fatalf("Lookup(work) = %v, %v", m, err)
	}
	if work.Addr < main.Start || work.Addr >= main.End {
		t.Errorf("work %#x outside [%#x, %#x)", work.Addr, main.Start, main.End)
	}
	if got, want := s.Describe(work.Addr+1), fmt.Sprintf("work+0x1/0x%x", work.Size); got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	if m, err := s.FindModule(path); err != nil || m != main {
		t.Errorf("FindModule(%q) = %v, %v", path, m, err)
	}

	_, _, err = s.Lookup("wrk")
	var unknown *UnknownSymbolError
	if !errors.As(err, &unknown) {
		t.Fatalf("Lookup(wrk) error %v, want *UnknownSymbolError", err)
	}
	if want := `unknown symbol "wrk" (did you mean: work, worker?)`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	_, _, err = s.Lookup("qqqqqqqq")
	if want := `unknown symbol "qqqqqqqq"`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
	if _, err := main.Resolve("helpr"); err == nil || err.Error() != `unknown symbol "helpr" in prog (did you mean: helper?)` {
		t.Errorf("Resolve(helpr) error %v", err)
	}

	_, err = s.FindModule("libfoo")
	var unknownMod *UnknownModuleError
	if !errors.As(err, &unknownMod) || unknownMod.Name != "libfoo" {
		t.Fatalf("FindModule(libfoo) error %v, want *UnknownModuleError", err)
	}
	if want := `unknown library "libfoo" (loaded: prog)`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestFindModuleNames(t *testing.T) {
	var mapped []*Mapped
	for _, path := range []string{"/bin/prog", "/a/libfoo.so.1", "/b/libfoo.so.2", "/lib/libc-2.36.so", "/lib/libcrypto.so.3"} {
		mapped = append(mapped, &Mapped{Module: &Module{Path: path}, Name: filepath.Base(path), filePath: path})
	}
	s := &Space{Mapped: mapped}
	for name, want := range map[string]string{
		"libfoo.so.1":         "libfoo.so.1",
		"libc":                "libc-2.36.so",
		"libcrypto":           "libcrypto.so.3",
		"libfoo.so.2":         "libfoo.so.2",
		"prog":                "prog",
		"/a/libfoo.so.1":      "libfoo.so.1",
		"/a/../b/libfoo.so.2": "libfoo.so.2",
	} {
		if m, err := s.FindModule(name); err != nil || m.Name != want {
			t.Errorf("FindModule(%q) = %v, %v; want %s", name, m, err, want)
		}
	}
	_, err := s.FindModule("libfoo")
	var amb *AmbiguousModuleError
	if !errors.As(err, &amb) {
		t.Fatalf("FindModule(libfoo) error %v, want *AmbiguousModuleError", err)
	}
	if want := `ambiguous library "libfoo" (matches: /a/libfoo.so.1, /b/libfoo.so.2)`; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	for _, name := range []string{"libfo", "libcryp", "/c/libfoo.so.1", "foo"} {
		var unknown *UnknownModuleError
		if _, err := s.FindModule(name); !errors.As(err, &unknown) {
			t.Errorf("FindModule(%q) error %v, want *UnknownModuleError", name, err)
		}
	}
}

func TestParseMapsLine(t *testing.T) {
	m, err := parseMapsLine("7f12a0000000-7f12a0026000 r-xp 0001a000 fe:01 326269                     /tmp/my lib.so (deleted)")
	if err != nil {
		t.Fatal(err)
	}
	want := mapping{start: 0x7f12a0000000, end: 0x7f12a0026000, perms: "r-xp", offset: 0x1a000, dev: "fe:01", inode: 326269, path: "/tmp/my lib.so (deleted)"}
	if m != want {
		t.Errorf("parsed %+v, want %+v", m, want)
	}
	m, err = parseMapsLine("7ffd1000-7ffd3000 rw-p 00000000 00:00 0")
	if err != nil || m.path != "" || m.inode != 0 {
		t.Errorf("anonymous line: %+v, %v", m, err)
	}
	if _, err := parseMapsLine("garbage"); err == nil {
		t.Error("garbage parsed")
	}
}

// TestLoadBiasSharedPage: with segments sharing a file page, the mapping's
// permissions pick the segment.
func TestLoadBiasSharedPage(t *testing.T) {
	mod := &Module{Path: "x", PIE: true, loads: nil}
	mod.loads = append(mod.loads,
		progHeader(0, 0, 0x7f0, 5),          // r-x
		progHeader(0x1e10, 0xe10, 0x100, 6), // rw-: file page 0 again
	)
	const bias = 0x7f0000000000
	maps := []mapping{{start: bias + 0x1000, end: bias + 0x2000, perms: "rw-p", offset: 0}}
	if got, err := loadBias(mod, maps); err != nil || got != bias {
		t.Errorf("loadBias(data mapping) = %#x, %v; want %#x", got, err, bias)
	}
	maps = []mapping{{start: bias, end: bias + 0x1000, perms: "r-xp", offset: 0}}
	if got, err := loadBias(mod, maps); err != nil || got != bias {
		t.Errorf("loadBias(text mapping) = %#x, %v; want %#x", got, err, bias)
	}
}

func TestSplitLoadsTwoPlacements(t *testing.T) {
	mod := &Module{Path: "x", PIE: true}
	mod.loads = append(mod.loads,
		progHeader(0, 0, 0x1000, 4),
		progHeader(0x1000, 0x1000, 0x1000, 5),
		progHeader(0x3000, 0x2000, 0x100, 6),
	)
	var maps []mapping
	for _, base := range []uint64{0x10000, 0x20000} {
		maps = append(maps,
			mapping{start: base, end: base + 0x1000, perms: "r--p", offset: 0},
			mapping{start: base + 0x1000, end: base + 0x2000, perms: "r-xp", offset: 0x1000},
			mapping{start: base + 0x3000, end: base + 0x4000, perms: "rw-p", offset: 0x2000},
		)
	}
	loads, err := splitLoads(mod, maps)
	if err != nil {
		t.Fatal(err)
	}
	if len(loads) != 2 || loads[0].bias != 0x10000 || loads[1].bias != 0x20000 || len(loads[0].maps) != 3 {
		t.Errorf("splitLoads = %+v, want two placements of 3 mappings at 0x10000 and 0x20000", loads)
	}
}

func progHeader(vaddr, off, filesz uint64, flags elf.ProgFlag) elf.ProgHeader {
	return elf.ProgHeader{Type: elf.PT_LOAD, Flags: flags, Off: off, Vaddr: vaddr, Filesz: filesz, Memsz: filesz}
}

// TestPreloadTaken: a program preloaded (read ahead while it starts) is
// the module LoadProcess gives for it, not the file opened again; one
// not taken is closed by Release.
func TestPreloadTaken(t *testing.T) {
	path := buildProg(t, t.TempDir(), "prog", "-fPIE", "-pie")
	p := Preload(path)
	if p == nil {
		t.Fatalf("Preload(%s) = nil", path)
	}
	other := Preload(path) // (one of two is taken)
	c := startProg(t, path)
	s := loadTestProcess(t, c.pid)
	p.Release()
	other.Release()
	if got := s.Main().Module; got != p.mod && got != other.mod {
		t.Errorf("LoadProcess opened %s again: not the preloaded module", path)
	}
	taken, left := p, other
	if s.Main().Module != p.mod {
		taken, left = other, p
	}
	if left.mod.file != nil {
		t.Error("the preload not taken was not closed by Release")
	}
	if taken.mod.file == nil {
		t.Error("Release closed the module taken")
	}
	if sym := mustLookup(t, s.Main().Module, "main"); sym.Addr == 0 {
		t.Error("main at 0")
	}
	if Preload(filepath.Join(t.TempDir(), "missing")) != nil {
		t.Error("Preload of a missing file is not nil")
	}
}
