// Command goexact is the Go tracee of the exactness tests: functions of
// the shapes the Go compiler gives entries and calls (a frameless leaf,
// the stack check and frame of a caller, a recursion deep enough to grow
// the stack, calls through func values and interfaces, a jump table),
// called with inputs that depend on what they returned before, so that a
// displaced instruction run wrongly changes the output.
//
// Usage: goexact N
//
// Prints "sum=HEX" and how many times each function was called.
package main

import (
	"fmt"
	"os"
	"strconv"
)

var calls struct{ leaf, frame, rec, add, sub, mul, sq, tri, sw, drive int }

//go:noinline
func leaf(a, b int) int {
	calls.leaf++
	return (a*3 + b>>1) ^ a
}

//go:noinline
func frame(a, b int) int {
	calls.frame++
	var arr [8]int
	for i := range arr {
		arr[i] = leaf(a+i, b)
	}
	s := 0
	for i, v := range arr {
		s += v << i
	}
	return s
}

//go:noinline
func rec(n, a int) int {
	calls.rec++
	var pad [64]int
	pad[n%64] = a
	if n == 0 {
		return a + pad[0]
	}
	return rec(n-1, a+1)*3 + pad[n%64]
}

//go:noinline
func add(a, b int) int { calls.add++; return a + b }

//go:noinline
func sub(a, b int) int { calls.sub++; return a - b }

//go:noinline
func mul(a, b int) int { calls.mul++; return a * (b | 1) }

var ops = [3]func(int, int) int{add, sub, mul}

type shape interface{ area(int) int }

type sq struct{}
type tri struct{}

//go:noinline
func (sq) area(x int) int { calls.sq++; return x * x }

//go:noinline
func (tri) area(x int) int { calls.tri++; return x * (x + 1) / 2 }

var shapes = [2]shape{sq{}, tri{}}

//go:noinline
func sw(x int) int {
	calls.sw++
	switch x & 15 {
	case 0:
		return x + 11
	case 1:
		return x ^ 0x55
	case 2:
		return x * 7
	case 3:
		return x - 99
	case 4:
		return x << 3
	case 5:
		return x >> 2
	case 6:
		return -x
	case 7:
		return x | 0x100
	case 8:
		return x &^ 0xff
	case 9:
		return x * x
	case 10:
		return x % 13
	case 11:
		return x / 3
	case 12:
		return x + x<<7
	case 13:
		return ^x
	case 14:
		return x >> 9
	default:
		return x - 1
	}
}

// drive calls every function n times, through func values and an
// interface too.
//
//go:noinline
func drive(n int) int {
	calls.drive++
	s := 1
	for i := 0; i < n; i++ {
		s = s*31 + leaf(i, s)
		s = s*31 + frame(i, s)
		s = s*31 + rec(i*7%40, s)
		s = s*31 + ops[i%3](i, s)
		s = s*31 + shapes[i%2].area(i+s&0xff)
		s = s*31 + sw(i+s)
	}
	return s
}

func main() {
	n, err := strconv.Atoi(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "goexact:", err)
		os.Exit(2)
	}
	s := drive(n)
	fmt.Printf("sum=%x\n", uint64(s))
	fmt.Printf("calls main.leaf=%d main.frame=%d main.rec=%d main.add=%d main.sub=%d main.mul=%d main.sq.area=%d main.tri.area=%d main.sw=%d main.drive=%d\n",
		calls.leaf, calls.frame, calls.rec, calls.add, calls.sub, calls.mul, calls.sq, calls.tri, calls.sw, calls.drive)
}
