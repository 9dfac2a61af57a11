package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/probe"
)

// outputMode is the mode of the files probe creates: a trace shows
// arguments, strings and addresses of another process, so only its
// owner reads it. A file that exists keeps the mode its owner gave it.
const outputMode = 0o600

// createOutput opens path for writing a trace: created 0600, or
// truncated if it exists. A symbolic link is refused rather than
// followed, so that probe (often root) cannot be pointed through one at
// a file it did not create; the error is bad input (exit status 2).
//
// "-", /dev/stdout and /dev/stderr name descriptors we already hold (the
// last two through links the system made): they get a duplicate of the
// descriptor, which opens nothing.
func createOutput(path string) (*os.File, error) {
	if fd, ok := ownDescriptor(path); ok {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return nil, fmt.Errorf("%w: -o %s: descriptor %d is not open", probe.ErrBadInput, path, fd)
		}
		return os.NewFile(uintptr(nfd), path), nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, outputMode)
	if errors.Is(err, unix.ELOOP) {
		return nil, symlinkError(path)
	}
	return f, err
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

func (e symlinkError) Is(target error) bool { return target == probe.ErrBadInput }

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
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|unix.O_NOFOLLOW, outputMode)
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
