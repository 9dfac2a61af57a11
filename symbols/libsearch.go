package symbols

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// FindLibraryFile finds the file a library not mapped yet would be loaded
// from, for a probe that waits for it: name is a path, or a name matched
// as the file NAME, NAME.so* or libNAME.so*. The directories searched are
// those the dynamic linker could load it from: next to the files already
// mapped, the process's working directory, its LD_LIBRARY_PATH, the
// executable's RUNPATH and RPATH ($ORIGIN expanded), the directories of
// /etc/ld.so.conf and the standard ones. The path returned has its
// symlinks resolved: it names the file /proc/PID/maps will show.
func (s *Space) FindLibraryFile(name string) (string, bool) {
	procDir := "/proc/" + strconv.Itoa(s.Pid)
	if strings.Contains(name, "/") {
		candidates := []string{name}
		if !filepath.IsAbs(name) && s.Pid > 0 {
			candidates = []string{filepath.Join(procDir, "cwd", name), name}
		}
		for _, c := range candidates {
			if real, ok := libraryFile(c); ok {
				return real, true
			}
		}
		return "", false
	}
	for _, dir := range s.librarySearchDirs(procDir) {
		for _, pattern := range []string{name, name + ".so", "lib" + name + ".so", name + ".so.*", "lib" + name + ".so.*"} {
			matches, _ := filepath.Glob(filepath.Join(dir, pattern))
			slices.Sort(matches)
			for _, m := range matches {
				if real, ok := libraryFile(m); ok {
					return real, true
				}
			}
		}
	}
	return "", false
}

// libraryFile reports whether path is a regular file holding a shared
// library (an ELF shared object that is not a PIE executable: dlopen
// refuses those), and its real path.
func libraryFile(path string) (string, bool) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", false
	}
	if abs, err := filepath.Abs(real); err == nil {
		real = abs
	}
	if st, err := os.Stat(real); err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	f, err := elf.Open(real)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if f.Type != elf.ET_DYN {
		return "", false
	}
	if flags, err := f.DynValue(elf.DT_FLAGS_1); err == nil && len(flags) > 0 && flags[0]&uint64(elf.DF_1_PIE) != 0 {
		return "", false
	}
	return real, true
}

// librarySearchDirs lists the directories FindLibraryFile searches, in
// order, without duplicates.
func (s *Space) librarySearchDirs(procDir string) []string {
	var dirs []string
	add := func(ds ...string) {
		for _, d := range ds {
			if d != "" && !slices.Contains(dirs, d) {
				dirs = append(dirs, d)
			}
		}
	}
	for _, m := range s.Mapped {
		add(filepath.Dir(m.filePath))
	}
	if s.Pid > 0 {
		if cwd, err := os.Readlink(procDir + "/cwd"); err == nil {
			add(cwd)
		}
		if env, err := os.ReadFile(procDir + "/environ"); err == nil {
			for _, kv := range bytes.Split(env, []byte{0}) {
				if v, ok := bytes.CutPrefix(kv, []byte("LD_LIBRARY_PATH=")); ok {
					add(strings.Split(string(v), ":")...)
				}
			}
		}
	}
	if main := s.Main(); main != nil && main.elf != nil {
		origin := filepath.Dir(main.filePath)
		for _, tag := range []elf.DynTag{elf.DT_RUNPATH, elf.DT_RPATH} {
			paths, _ := main.elf.DynString(tag)
			for _, p := range paths {
				for _, d := range strings.Split(p, ":") {
					d = strings.ReplaceAll(strings.ReplaceAll(d, "${ORIGIN}", origin), "$ORIGIN", origin)
					add(d)
				}
			}
		}
	}
	add(ldSoConfDirs("/etc/ld.so.conf", 0)...)
	add(standardLibDirs()...)
	return dirs
}

// ldSoConfDirs reads the directories of an ld.so.conf file, following its
// include lines (as ldconfig does when it builds ld.so.cache).
func ldSoConfDirs(path string, depth int) []string {
	if depth > 8 {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var dirs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if inc, ok := strings.CutPrefix(line, "include"); ok && (strings.HasPrefix(inc, " ") || strings.HasPrefix(inc, "\t")) {
			pattern := strings.TrimSpace(inc)
			if !filepath.IsAbs(pattern) {
				pattern = filepath.Join(filepath.Dir(path), pattern)
			}
			files, _ := filepath.Glob(pattern)
			for _, inc := range files {
				dirs = append(dirs, ldSoConfDirs(inc, depth+1)...)
			}
			continue
		}
		if strings.HasPrefix(line, "/") {
			dirs = append(dirs, line)
		}
	}
	return dirs
}

// standardLibDirs are the dynamic linker's built-in directories.
func standardLibDirs() []string {
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	var dirs []string
	if triplet != "" {
		dirs = append(dirs, "/lib/"+triplet, "/usr/lib/"+triplet)
	}
	return append(dirs, "/lib64", "/usr/lib64", "/lib", "/usr/lib")
}
