// goopen reads the files named on its standard input, one a line, and
// says what each read gave: a Go program for the error-injection tests
// of system calls (its os package makes them itself, no C library).
package main

import (
	"bufio"
	"fmt"
	"os"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	failed := 0
	for in.Scan() {
		data, err := os.ReadFile(in.Text())
		if err != nil {
			fmt.Printf("error: %v\n", err)
			failed++
			continue
		}
		fmt.Printf("read %s: %d bytes\n", in.Text(), len(data))
	}
	fmt.Printf("failed=%d\n", failed)
}
