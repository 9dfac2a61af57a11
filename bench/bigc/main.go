// Command bigc writes a C program with many small functions, for timing
// probe on a large binary: installing the function tracer on every
// function, and loading the symbols and DWARF of a big file.
//
//	go run ./bench/bigc -n 12000 -parts 4 big/
//	gcc -O0 -g -o big/big big/*.c        # or compile the parts in parallel
//	probe run --tracer function -o /dev/null -- big/big
//
// main (in main.c) calls each function exactly once, in order, through a
// table, and prints a checksum that depends on every call. With an
// argument R it prints "ready" and does that R times, each time after
// reading a line from stdin (for attaching between rounds). The functions
// are spread over part0.c ... so that they can be compiled in parallel.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	n := flag.Int("n", 12000, "number of functions")
	parts := flag.Int("parts", 4, "files to spread the functions over")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: bigc [-n N] [-parts P] DIR")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 || *n < 1 || *parts < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := write(flag.Arg(0), *n, *parts); err != nil {
		fmt.Fprintln(os.Stderr, "bigc:", err)
		os.Exit(1)
	}
}

// write emits part0.c ... with f00000..f(n-1), of a few shapes so the
// first instructions and sizes vary, and main.c calling each once.
func write(dir string, n, parts int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	per := (n + parts - 1) / parts
	for p := 0; p*per < n; p++ {
		err := writeFile(filepath.Join(dir, fmt.Sprintf("part%d.c", p)), func(w *bufio.Writer) {
			for i := p * per; i < min(n, (p+1)*per); i++ {
				function(w, i)
			}
		})
		if err != nil {
			return err
		}
	}
	return writeFile(filepath.Join(dir, "main.c"), func(w *bufio.Writer) {
		fmt.Fprintln(w, "#include <stdio.h>")
		fmt.Fprintln(w, "#include <stdlib.h>")
		fmt.Fprintln(w)
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "unsigned f%05d(unsigned);\n", i)
		}
		fmt.Fprintln(w)
		fmt.Fprintln(w, "static unsigned (*const table[])(unsigned) = {")
		for i := 0; i < n; i++ {
			fmt.Fprintf(w, "\tf%05d,\n", i)
		}
		fmt.Fprintln(w, "};")
		fmt.Fprintln(w)
		w.WriteString(mainFunc)
	})
}

// mainFunc is main.c's main: the calls from main itself, so that every
// function's caller is main.
const mainFunc = `
int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 0;
	char line[64];
	if (rounds > 0) {
		printf("ready\n");
		fflush(stdout);
	}
	for (int r = 1; r <= (rounds > 0 ? rounds : 1); r++) {
		if (rounds > 0 && !fgets(line, sizeof line, stdin))
			break;
		unsigned s = 1;
		for (unsigned long i = 0; i < sizeof table / sizeof table[0]; i++)
			s = table[i](s);
		if (rounds > 0)
			printf("round %d checksum=%u\n", r, s);
		else
			printf("functions=%d checksum=%u\n", (int)(sizeof table / sizeof table[0]), s);
		fflush(stdout);
	}
	return 0;
}
`

func function(w *bufio.Writer, i int) {
	name := fmt.Sprintf("f%05d", i)
	switch i % 4 {
	case 0:
		fmt.Fprintf(w, "__attribute__((noinline)) unsigned %s(unsigned x) { return x * %du + %du; }\n", name, 2*i+1, i)
	case 1:
		fmt.Fprintf(w, "__attribute__((noinline)) unsigned %s(unsigned x) { if (x & 1) return x ^ %du; return x + %du; }\n", name, i, 3*i)
	case 2:
		fmt.Fprintf(w, "__attribute__((noinline)) unsigned %s(unsigned x) { unsigned s = x; for (int k = 0; k < %d; k++) s = s * 31u + k; return s; }\n", name, i%7+1)
	case 3:
		fmt.Fprintf(w, "__attribute__((noinline)) unsigned %s(unsigned x) { unsigned a[4] = {x, %du, x >> 3, %du}; return a[x & 3] + a[(x >> 2) & 3]; }\n", name, i, i*7)
	}
}

func writeFile(name string, body func(*bufio.Writer)) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	body(w)
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
