// Command gofork is a Go tracee that starts a child with os/exec: Go
// forks with clone(CLONE_VM|CLONE_VFORK), so the child shares the
// parent's memory, probes included, until it execs.
//
// Usage: gofork N M: calls main.work N times, then runs itself as
// "gofork child M", which calls main.work M times; both print their sums.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
)

var scale = 3

//go:noinline
func work(i int) int {
	return i*scale + 1
}

func loop(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += work(i)
	}
	return s
}

func main() {
	if len(os.Args) == 3 && os.Args[1] == "child" {
		m, _ := strconv.Atoi(os.Args[2])
		fmt.Printf("child sum %d\n", loop(m))
		os.Exit(5)
	}
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: gofork N M")
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Args[1])
	fmt.Printf("parent sum %d\n", loop(n))
	cmd := exec.Command("/proc/self/exe", "child", os.Args[2])
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	err := cmd.Run()
	code := -1
	if cmd.ProcessState != nil {
		code = cmd.ProcessState.ExitCode()
	}
	fmt.Printf("child exit %d (%v)\n", code, err)
	fmt.Printf("parent sum %d\n", loop(n))
}
