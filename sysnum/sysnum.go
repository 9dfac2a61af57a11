// Package sysnum names the Linux system calls of the machine it is built
// for: x86-64 or arm64. The tables are generated (see gen/) from
// golang.org/x/sys/unix, itself generated from the kernel's headers.
//
//	nr, ok := sysnum.Number("openat") // 257 on x86-64, 56 on arm64
package sysnum

//go:generate go run ./gen

import "sort"

var names = func() map[int]string {
	m := make(map[int]string, len(numbers))
	for name, nr := range numbers {
		if old, ok := m[nr]; !ok || name < old {
			m[nr] = name
		}
	}
	return m
}()

// Number returns the number of the system call name ("openat").
func Number(name string) (int, bool) {
	nr, ok := numbers[name]
	return nr, ok
}

// Name returns the name of system call nr, or "" if it is unknown.
func Name(nr int) string { return names[nr] }

// Names returns every system call name, sorted.
func Names() []string {
	all := make([]string, 0, len(numbers))
	for name := range numbers {
		all = append(all, name)
	}
	sort.Strings(all)
	return all
}
