// Command gowork is a Go tracee for probe's integration tests.
//
// Usage: gowork [N [G]]
//
// It calls main.work N times (default 10) from each of G goroutines
// (default 1: from main itself) and prints a deterministic
// "sum=<sum> calls=<G*N>" on stdout and "gowork: done" on stderr.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

var scale = 3

//go:noinline
func work(i int) int {
	return i*scale + i>>2
}

func loop(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += work(i)
	}
	return s
}

func arg(i, def int) int {
	if len(os.Args) <= i {
		return def
	}
	v, err := strconv.Atoi(os.Args[i])
	if err != nil {
		fmt.Fprintln(os.Stderr, "gowork:", err)
		os.Exit(2)
	}
	return v
}

func main() {
	n := arg(1, 10)
	g := arg(2, 1)
	sum := 0
	if g <= 1 {
		g = 1
		sum = loop(n)
	} else {
		sums := make([]int, g)
		var wg sync.WaitGroup
		for j := range sums {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sums[j] = loop(n)
			}()
		}
		wg.Wait()
		for _, s := range sums {
			sum += s
		}
	}
	fmt.Printf("sum=%d calls=%d\n", sum, g*n)
	fmt.Fprintln(os.Stderr, "gowork: done")
}
