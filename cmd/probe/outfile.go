package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/probedbg/probe/fetch"
)

// outputMode is the mode of the files probe creates: a trace shows
// arguments, strings and addresses of another process, so only its
// owner reads it. A file that exists keeps the mode its owner gave it.
const outputMode = 0o600

// createOutput opens path for writing a trace: created 0600, or
// truncated if it exists. A path with a symbolic link anywhere in it is
// refused rather than followed, so that probe (often root) cannot be
// pointed through one (a link to /etc as a directory of the path, or as
// the file) at a file it did not create. Errors name the path and are bad
// input (exit status 2): the user named it.
//
// "-", /dev/stdout and /dev/stderr name descriptors we already hold (the
// last two through links the system made): they get a duplicate of the
// descriptor, which opens nothing.
func createOutput(path string) (*os.File, error) {
	if fd, ok := ownDescriptor(path); ok {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return nil, outputError{path, fmt.Errorf("descriptor %d is not open", fd)}
		}
		return os.NewFile(uintptr(nfd), path), nil
	}
	// O_NONBLOCK: a FIFO with no reader fails (ENXIO) instead of holding
	// us, and the program, before anything starts. Cleared once open.
	fd, err := openFdNoSymlinks(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_NONBLOCK)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, symlinkError(linkIn(path))
	case errors.Is(err, unix.ENXIO) && isFIFO(path):
		return nil, outputError{path, errors.New("a FIFO with no reader (start its reader first)")}
	case err != nil:
		return nil, outputError{path, err}
	}
	if err := checkWritable(fd); err != nil {
		unix.Close(fd)
		return nil, outputError{path, err}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, outputError{path, err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// checkWritable refuses an output that opens for writing but takes no
// trace, before anything is started rather than at the first event:
// files of /proc and /sys are the kernel's settings and reports (root
// opens /proc/version for writing, and a write to a setting may change
// it), and a zero-length write finds what fails every write (EIO from
// other such files, ENOSPC from /dev/full) without writing a byte.
func checkWritable(fd int) error {
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		return err
	}
	switch fs.Type {
	case unix.PROC_SUPER_MAGIC, unix.SYSFS_MAGIC:
		return errors.New("a file of the kernel's /proc or /sys, not one for a trace")
	}
	if _, err := unix.Write(fd, nil); err != nil {
		return err
	}
	return nil
}

func isFIFO(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode()&os.ModeNamedPipe != 0
}

// outputError is an output path that cannot be opened: bad input.
type outputError struct {
	path string
	err  error
}

func (e outputError) Error() string        { return fmt.Sprintf("%s: %v", e.path, e.err) }
func (e outputError) Is(target error) bool { return target == fetch.ErrBadInput }

// openNoSymlinks opens path with flags (mode outputMode), following no
// symbolic link in any of its components: openat2's RESOLVE_NO_SYMLINKS
// (Linux 5.6), else a walk opening each directory with O_NOFOLLOW. A link
// gives ELOOP.
func openNoSymlinks(path string, flags int) (*os.File, error) {
	fd, err := openFdNoSymlinks(path, flags)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// openFdNoSymlinks is openNoSymlinks giving the descriptor.
func openFdNoSymlinks(path string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: outputMode, Resolve: unix.RESOLVE_NO_SYMLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if errors.Is(err, unix.ENOSYS) {
		fd, err = walkNoSymlinks(path, flags)
	}
	return fd, err
}

// walkNoSymlinks is openNoSymlinks without openat2.
func walkNoSymlinks(path string, flags int) (int, error) {
	dir := unix.AT_FDCWD
	if filepath.IsAbs(path) {
		dir = -1
	}
	parts := strings.Split(filepath.Clean(path), "/")
	for i, part := range parts {
		if part == "" {
			if i == 0 {
				fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					return -1, err
				}
				dir = fd
			}
			continue
		}
		last := i == len(parts)-1
		f := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			f = flags | unix.O_NOFOLLOW | unix.O_CLOEXEC
		}
		fd, err := unix.Openat(dir, part, f, outputMode)
		if dir >= 0 {
			unix.Close(dir)
		}
		if errors.Is(err, unix.ENOTDIR) && !last {
			if fi, lerr := os.Lstat(strings.Join(parts[:i+1], "/")); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
				err = unix.ELOOP
			}
		}
		if err != nil {
			return -1, err
		}
		if last {
			return fd, nil
		}
		dir = fd
	}
	return -1, unix.EISDIR
}

// linkIn names the first component of path that is a symbolic link (the
// path itself if none is found).
func linkIn(path string) string {
	parts := strings.Split(filepath.Clean(path), "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		if p == "" {
			continue
		}
		if fi, err := os.Lstat(p); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return p
		}
	}
	return path
}

// ownDescriptor says which of our standard output descriptors path names,
// if it is one. Higher /dev/fd/N are not taken: the Go runtime holds
// descriptors of its own there.
func ownDescriptor(path string) (int, bool) {
	switch path {
	case "-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1":
		return 1, true
	case "/dev/stderr", "/dev/fd/2", "/proc/self/fd/2":
		return 2, true
	}
	return 0, false
}

// symlinkError is an output path that is a symbolic link; it is bad input.
type symlinkError string

func (e symlinkError) Error() string {
	return fmt.Sprintf("%s is a symbolic link: probe does not write through one (give the path it points to)", string(e))
}

func (e symlinkError) Is(target error) bool { return target == fetch.ErrBadInput }

// historyPath returns the REPL's history file, $XDG_STATE_HOME/probe/history
// (default ~/.local/state), made ready for readline: its directory is
// created 0700 and the file 0600, so that no other user reads the
// commands typed. It returns "" (no history) if the directory or the
// file is a symbolic link or not ours, rather than write through it.
func historyPath() string {
	state := os.Getenv("XDG_STATE_HOME")
	if state == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		state = filepath.Join(home, ".local", "state")
	}
	dir := filepath.Join(state, "probe")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return ""
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || !ownedByUs(fi) {
		return ""
	}
	path := filepath.Join(dir, "history")
	f, err := openNoSymlinks(path, unix.O_RDONLY|unix.O_CREAT)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || !ownedByUs(fi) {
		return ""
	}
	return path
}

func ownedByUs(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}

// sharedTerminal is which of the tracee's standard output and error
// write to the terminal the trace goes to: their writes wait for the
// trace (probe.Tracer.SyncWrites), so that its lines and the program's
// come out in the order they happened, as under ltrace. None when the
// trace goes to a file or a pipe.
func sharedTerminal(pid int, trace *os.File) []int {
	if trace == nil || !term.IsTerminal(int(trace.Fd())) {
		return nil
	}
	var ours unix.Stat_t
	if unix.Fstat(int(trace.Fd()), &ours) != nil {
		return nil
	}
	var fds []int
	for _, fd := range []int{1, 2} {
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/fd/%d", pid, fd), &st) == nil && st.Dev == ours.Dev && st.Ino == ours.Ino && st.Rdev == ours.Rdev {
			fds = append(fds, fd)
		}
	}
	return fds
}
