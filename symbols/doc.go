// Package symbols resolves probe locations to addresses and addresses back
// to "sym+off/size", from ELF files and /proc/PID/maps only (never ptrace).
//
//	space, err := symbols.LoadProcess(pid) // or symbols.LoadBinary(path)
//	mod, sym, err := space.Lookup("malloc") // runtime address: sym.Addr + mod.Bias
package symbols
