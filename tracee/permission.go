package tracee

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// pfKthread is PF_KTHREAD, in the flags of /proc/PID/stat.
const pfKthread = 0x00200000

// PermissionHint says what to look at when the kernel refuses to let us
// trace pid: a kernel thread no one can trace; Yama's ptrace_scope is
// named only where Yama is (a kernel without it has no such file).
func PermissionHint(pid int) string {
	if comm, ok := kernelThread(pid); ok {
		return fmt.Sprintf("%s is a kernel thread: no one can trace it", comm)
	}
	if _, err := os.Stat("/proc/sys/kernel/yama/ptrace_scope"); err == nil {
		return "check /proc/sys/kernel/yama/ptrace_scope, or run with CAP_SYS_PTRACE"
	}
	return "run as its user, or with CAP_SYS_PTRACE"
}

// kernelThread reports whether pid is a kernel thread, and its name.
func kernelThread(pid int) (string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", false
	}
	// pid (comm) state ppid pgrp session tty_nr tpgid flags: comm may
	// hold spaces and parentheses, so fields count from the last ')'.
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 7 {
		return "", false
	}
	flags, err := strconv.ParseUint(f[6], 10, 64)
	return s[open+1 : end], err == nil && flags&pfKthread != 0
}
