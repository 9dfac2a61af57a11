// Command gowork is a Go tracee for probe's integration tests.
//
// Usage: gowork [N [G]]
//
// It calls main.work N times (default 10) from each of G goroutines
// (default 1: from main itself) and prints a deterministic
// "sum=<sum> calls=<G*N>" on stdout and "gowork: done" on stderr.
//
//	gowork until-term G
//
// G goroutines call loop(100) until SIGTERM, each checking every sum;
// it prints "ready" once they run, then "ok", or "BAD" and exits 1.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
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
	if len(os.Args) > 1 && os.Args[1] == "until-term" {
		untilTerm(arg(2, 1))
		return
	}
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

func untilTerm(g int) {
	want := 0
	for i := range 100 {
		want += i*scale + i>>2
	}
	bad := make(chan int, 1)
	for range g {
		go func() {
			for n := 0; ; n++ {
				if s := loop(100); s != want {
					bad <- s
					return
				}
				if n%64 == 0 {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}()
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fmt.Println("ready")
	select {
	case <-term:
		fmt.Println("ok")
	case s := <-bad:
		fmt.Printf("BAD loop(100)=%d, want %d\n", s, want)
		os.Exit(1)
	}
}
