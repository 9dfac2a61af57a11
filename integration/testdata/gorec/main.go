// gorec recurses with large frames in several goroutines so that their
// stacks grow (and are copied) while main.deep is return-probed.
//
//	gorec DEPTH GOROUTINES
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
)

//go:noinline
func deep(n int) int {
	var pad [512]byte
	pad[n%512] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + int(pad[n%512])
}

func main() {
	depth, _ := strconv.Atoi(os.Args[1])
	gs, _ := strconv.Atoi(os.Args[2])
	sums := make([]int, gs)
	var wg sync.WaitGroup
	for g := 0; g < gs; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[g] = deep(depth)
		}()
	}
	wg.Wait()
	total := 0
	for _, s := range sums {
		total += s
	}
	fmt.Printf("calls=%d total=%d\n", gs*(depth+1), total)
}
