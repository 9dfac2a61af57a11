// gotrace is the Go tracee of the function tracers: goroutines of a
// known call shape, a panic recovered through traced frames, a recursion
// deep enough to grow (and move) the goroutine stack, and GCs.
//
//	gotrace GOROUTINES N DEPTH
//
// Each of GOROUTINES goroutines calls main.work N times, each call
// calling main.leaf twice; then main.risky calls main.thrower, which
// panics, and recovers, GOROUTINES times; then main.deep recurses DEPTH
// deep (DEPTH+1 calls). main.main never returns: it exits with status 3.
package main

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
)

//go:noinline
func leaf(x int) int { return x*2 + 1 }

//go:noinline
func work(x int) int { return leaf(x) + leaf(x+1) }

//go:noinline
func thrower(x int) int {
	if x >= 0 {
		panic(fmt.Sprintf("boom %d", x))
	}
	return x
}

//go:noinline
func risky(x int) (r int) {
	defer func() {
		if recover() != nil {
			r = -x
		}
	}()
	return thrower(x)
}

//go:noinline
func deep(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%256])
}

func main() {
	gs, _ := strconv.Atoi(os.Args[1])
	n, _ := strconv.Atoi(os.Args[2])
	depth, _ := strconv.Atoi(os.Args[3])
	sums := make([]int, gs)
	var wg sync.WaitGroup
	for g := 0; g < gs; g++ {
		wg.Add(1)
		go func() {
			for i := 0; i < n; i++ {
				sums[g] += work(i)
			}
			wg.Done() // not deferred: no compiler-made wrapper to trace
		}()
	}
	wg.Wait()
	runtime.GC()
	total, recovered := 0, 0
	for g := 0; g < gs; g++ {
		total += sums[g]
		recovered += risky(g)
	}
	d := deep(depth)
	runtime.GC()
	fmt.Printf("total=%d recovered=%d deep=%d\n", total, recovered, d)
	os.Exit(3)
}
