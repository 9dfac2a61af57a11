package probe

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/symbols"
)

// Arguments and return values of traced functions (FuncTraceOptions.Args:
// uftrace's -a, ftrace's funcgraph-args and funcgraph-retval), typed from
// DWARF. At an entry the parameters are where the calling convention put
// them, and not yet where -O0 code's DWARF says: its prologue has not
// stored them. So integers and pointers are read from the argument
// registers and the stack (funcargs_*.go places them), with their DWARF
// types; floats and structs by their DWARF location, only where it holds
// at the entry (registers, or the caller's frame): elsewhere they show as
// "?" and "{...}". A result is shown when it is an integer or a pointer.

// funcArgs is what Args shows of one function.
type funcArgs struct {
	params *fetch.Args // the fetch-args of the parameters that have a value
	slots  []argSlot   // every parameter, in order
	result *fetch.Args // the result, or nil (void, a float, a struct)
	specs  []string    // params' fetch-args ("name=$arg1:s32")
	// failsWithErrno: the table says the function's failure result
	// sets errno (its "!")
	failsWithErrno bool
	// varFormat is the slot of a printf-like function's format (the
	// table's "format"), whose "..." arguments are read at a stop
	// (varargs.go), or -1; they start after what the fixed parameters
	// took.
	varFormat int
	fixed     argsTaken
	vars      map[string]*symbols.Var // the DWARF parameters specs read, compiled
	enum      map[int64]string        // the result's names, if an enum
	format    string                  // the result's format, if a table type
	// outSlot is 1 + the slot of a buffer the call fills (the table's
	// outbuf, outstr, outfds), shown at its return; 0: none.
	outSlot int
	// arrays: a parameter is an array of strings (the table's
	// strarray), read at a stop.
	arrays bool
	vals   []fetch.Field // scratch: params' values
	fields []fetch.Field // scratch: what a handler gets, valid during it
}

// argSlot is one parameter: field i of params' values, or text when i < 0;
// an enum's value shows as its name.
type argSlot struct {
	name   string
	i      int
	text   string
	enum   map[int64]string
	format string // a prototype table's type: see decoders
}

// argsTaken is how many integer and vector argument registers and stack
// words a call's parameters take.
type argsTaken struct{ gpr, vec, stack int }

// paramPlace is where a parameter is at the entry: a fetch-arg body with
// its type ("$arg1:s32"), or, with dwarf, its DWARF location if that
// holds at the entry; neither: nowhere we can tell.
type paramPlace struct {
	fetch string
	dwarf bool
}

// compileFuncArgs reads the signature of function fn, whose entry is at
// runtime address entry in m, from m's DWARF or the table of prototypes:
// in a library the table's types win (ltrace's), in the program its own
// DWARF (its own "close" is not libc's). nil where neither has it.
func compileFuncArgs(m *symbols.Mapped, fn string, entry uint64, library bool) *funcArgs {
	var sig symbols.Signature
	var d *symbols.DebugInfo
	proto, inTable := fetch.Prototype(fn)
	err := errors.New("the table's") // (a library's DWARF is not read for it: glibc's takes seconds)
	if !inTable || !library {
		if d, err = m.Debug(); err == nil {
			sig, err = d.Signature(entry)
		}
	}
	table := false
	if inTable && (library || err != nil) {
		table = true
		// The table's types, as ltrace's: open's flags by name, its mode
		// (behind "..." in C); and its names, the manual's, whether the
		// library has DWARF or not (glibc's malloc calls its size
		// "bytes"), so that a filter reads the same everywhere. They
		// are all in registers or on the stack: no DWARF is read.
		sig, err, d = proto, nil, nil
	}
	if err != nil {
		return nil
	}
	fa := &funcArgs{vars: map[string]*symbols.Var{}, failsWithErrno: table && fetch.FailsWithErrno(fn)}
	vars := fa.vars
	places, fixed := placeParams(sig.Params, sig.Result)
	goFn := len(sig.Results) > 0 || isGo(m)
	if isClone(fn) || goFn {
		// gcc's clones take what their callers pass after IPA (a
		// parameter dropped, a struct's field for the struct, this's
		// field for this): not the declared parameters in order, nor
		// does Go's ABI place them as C's. Only DWARF, which describes
		// the function's own code, says where each one is.
		places = make([]paramPlace, len(sig.Params))
		for i := range places {
			places[i].dwarf = true
		}
	}
	var specs, names []string
	for i, p := range sig.Params {
		name := fetch.FieldName(p.Name)
		if name == "" || slices.Contains(names, name) {
			name = fmt.Sprintf("arg%d", i+1)
		}
		names = append(names, name)
		var pl paramPlace
		if i < len(places) {
			pl = places[i]
		}
		spec := ""
		switch {
		case pl.fetch != "":
			spec = pl.fetch
		case pl.dwarf && d != nil && p.Name != "":
			if v := varAtEntry(d, entry, p.Name); v != nil {
				vars[p.Name], spec = v, p.Name
			}
		}
		if spec == "" {
			text := "?"
			if p.Class == symbols.ClassAggregate {
				text = "{...}"
			}
			fa.slots = append(fa.slots, argSlot{name: name, i: -1, text: text})
			continue
		}
		fa.slots = append(fa.slots, argSlot{name: name, i: len(specs), enum: p.Enum, format: p.Format})
		specs = append(specs, name+"="+spec)
	}
	env := fetch.CompileEnv{DWARF: func(expr string) (fetch.DwarfVar, error) {
		v := vars[expr] // (compiled by varAtEntry)
		if v == nil {
			return nil, fmt.Errorf("%s: not a parameter read at the entry", expr)
		}
		return dwarfVar{v}, nil
	}}
	fa.specs = specs
	fa.varFormat, fa.fixed = -1, fixed
	for i, sl := range fa.slots {
		switch sl.format {
		case "outbuf", "outstr", "outfds":
			fa.outSlot = i + 1
		case "strarray":
			fa.arrays = true
		}
	}
	if sig.Variadic {
		fa.varFormat = formatParam(fa)
	}
	if fa.params, err = fetch.Compile(specs, env); err != nil {
		return nil // a type this table has wrong: no arguments rather than bad ones
	}
	result := sig.Result
	if len(sig.Results) > 0 {
		// Go's ABI returns the first result where C's does (%rax, x0)
		// when it is an integer, a bool or a pointer; the rest, and a
		// first one of another kind, are not shown.
		result = sig.Results[0]
	}
	if spec := resultFetch(result); spec != "" {
		fa.result, _ = fetch.Compile([]string{"retval=" + spec}, fetch.CompileEnv{Return: true})
		fa.enum, fa.format = result.Enum, result.Format
	}
	return fa
}

// isClone reports whether fn is a copy of a function gcc made with
// other parameters (f.isra.0, f.constprop.1, f.part.0).
func isClone(fn string) bool {
	return strings.Contains(fn, ".isra.") || strings.Contains(fn, ".constprop.") || strings.Contains(fn, ".part.")
}

// unknownArgs is what --calls shows of a function with no DWARF and no
// prototype: its arguments unknown, "?" (how many there are is not
// known either), its result register in hex, as it may be anything.
func unknownArgs() *funcArgs {
	fa := &funcArgs{vars: map[string]*symbols.Var{}, varFormat: -1, slots: []argSlot{{name: "args", i: -1, text: "?"}}}
	fa.params, _ = fetch.Compile(nil, fetch.CompileEnv{})
	fa.result, _ = fetch.Compile([]string{"retval=$retval:x64"}, fetch.CompileEnv{Return: true})
	return fa
}

// prototypeName is name if the table of prototypes has it, else "".
func prototypeName(name string) string {
	if fetch.HasPrototype(name) {
		return name
	}
	return ""
}

// varAtEntry is parameter name compiled at the entry if its DWARF
// location there reads only registers and the words at and above sp (the
// caller's frame), which hold there, and not the function's own frame,
// which its prologue has yet to fill; else nil.
func varAtEntry(d *symbols.DebugInfo, entry uint64, name string) *symbols.Var {
	v, err := d.Var(entry, name)
	if err != nil || !fetch.RecordableVar(dwarfVar{v}) {
		return nil
	}
	return v
}

// takeReg takes the next of n argument registers of a kind, *used of
// them taken so far, or when none is left the next stack word; it
// returns the register's index, or -1 for the stack.
func takeReg(used *int, n int, stack *int) int {
	if *used < n {
		*used++
		return *used - 1
	}
	*stack++
	return -1
}

// intArg is the location of the next integer or pointer parameter:
// $argN, or $stackN past the registers.
func intArg(used *int, n int, stack *int) string {
	if r := takeReg(used, n, stack); r >= 0 {
		return fmt.Sprintf("$arg%d", r+1)
	}
	return fmt.Sprintf("$stack%d", *stack-1)
}

// scalarFetch is the fetch-arg body of an integer or pointer parameter
// found at loc ($argN, $stackN): a char pointer as the string.
func scalarFetch(p symbols.ABIValue, loc string) string {
	switch {
	case p.Class == symbols.ClassPointer && p.String:
		return "+0(" + loc + "):string"
	case p.Class == symbols.ClassPointer:
		return loc + ":x64"
	case p.Char && p.Size == 1:
		return loc + ":char"
	case p.Signed:
		return fmt.Sprintf("%s:s%d", loc, 8*p.Size)
	}
	return fmt.Sprintf("%s:u%d", loc, 8*p.Size)
}

// resultFetch is the fetch-arg body of a result: integers and pointers
// (a char pointer as the pointer: a record of the return has no memory).
func resultFetch(r symbols.ABIValue) string {
	switch r.Class {
	case symbols.ClassInt:
		return scalarFetch(r, "$retval")
	case symbols.ClassPointer:
		return "$retval:x64"
	}
	return ""
}

// entryFields are fn's parameters at the hit of its entry, or nil.
func (t *Tracer) entryFields(fn *traceFunc, hit *Hit) []fetch.Field {
	fa := fn.args
	if fa == nil {
		return nil
	}
	fa.vals = fa.params.Fetch(t.envFor(hit), fa.vals[:0])
	fa.fields = fa.show(fa.vals, fa.fields[:0])
	if fa.varFormat >= 0 && !t.replaying(hit) {
		fa.fields = t.variadicFields(fa, hit, fa.fields)
	}
	if fa.arrays && !t.replaying(hit) {
		t.arrayFields(fa, hit)
	}
	return fa.fields
}

// defaultArrayLen is how many of an array's elements are shown by
// default, as ltrace's -A.
const defaultArrayLen = 4

// arrayFields shows fa's arrays of strings as their strings: ["ls",
// "-l", ...], the first FuncTraceOptions.ArrayLen of them.
func (t *Tracer) arrayFields(fa *funcArgs, hit *Hit) {
	most := cmp.Or(t.ft.opts.ArrayLen, defaultArrayLen)
	for _, sl := range fa.slots {
		if sl.format != "strarray" || sl.i < 0 || sl.i >= len(fa.vals) {
			continue
		}
		i := slices.IndexFunc(fa.fields, func(f fetch.Field) bool { return f.Name == sl.name })
		if i < 0 {
			continue
		}
		if v, ok := stringArray(hit.Mem, fa.vals[sl.i].Value.Uint(), most); ok {
			fa.fields[i].Value = fetch.DwarfValue(v)
		}
	}
}

// stringArray is the NULL-terminated array of strings at addr as C
// shows it: ["a", "b"], its first most strings and "..." for more;
// false for a NULL array, or one that cannot be read.
func stringArray(mem fetch.Memory, addr uint64, most int) (string, bool) {
	if addr == 0 {
		return "", false
	}
	b := []byte{'['}
	var word [8]byte
	for i := 0; ; i++ {
		if n, err := mem.ReadAt(word[:], int64(addr)+int64(i)*8); err != nil || n < len(word) {
			return "", false
		}
		p := binary.LittleEndian.Uint64(word[:])
		if p == 0 {
			break
		}
		if i > 0 {
			b = append(b, ", "...)
		}
		if i == most {
			b = append(b, "..."...)
			break
		}
		if str, ok := fetch.ReadString(mem, p); ok {
			b = fetch.StringValue(str).AppendText(b)
		} else {
			b = fetch.FaultValue(fetch.TypeString).AppendText(b)
		}
	}
	return string(append(b, ']')), true
}

// show appends to dst the parameters as --args shows them, from vals,
// their fetched values: every parameter, each by its slot.
func (fa *funcArgs) show(vals, dst []fetch.Field) []fetch.Field {
	var flags *uint64 // open's, once seen
	for _, s := range fa.slots {
		v := fetch.DwarfValue(s.text)
		if s.i >= 0 && s.i < len(vals) {
			raw := vals[s.i].Value
			if s.format == "oflags" {
				f := raw.Uint()
				flags = &f
			}
			if s.format == "mode" && flags != nil && *flags&(unix.O_CREAT|unix.O_TMPFILE&^unix.O_DIRECTORY) == 0 {
				// open's mode is passed only with O_CREAT or
				// O_TMPFILE: else its register holds anything.
				// (chmod's, mkdir's and umask's always are.)
				continue
			}
			v = shown(raw, s.enum, s.format)
		}
		dst = append(dst, fetch.Field{Name: s.name, Value: v})
	}
	return dst
}

// resultFields is the result of f's call at the hit of its return, or
// nil; then the buffer it filled, if the table says it fills one.
func (t *Tracer) resultFields(f *shadowFrame, hit *Hit) []fetch.Field {
	fn := f.fn
	if fn == nil || fn.args == nil || fn.args.result == nil {
		return nil
	}
	fa := fn.args
	fa.fields = fa.result.Fetch(t.envFor(hit), fa.fields[:0])
	failed := len(fa.fields) == 1 && fa.failed(fa.fields[0].Value)
	for i := range fa.fields {
		fa.fields[i].Value = shown(fa.fields[i].Value, fa.enum, fa.format)
	}
	if failed && t.ft.opts.Errno {
		errno := fetch.DwarfValue("?") // (a C library whose errno we cannot find)
		if e, ok := t.hitErrno(hit); ok {
			errno = fetch.DwarfValue(fetch.ErrnoName(e))
		}
		fa.fields = append(fa.fields, fetch.Field{Name: "errno", Value: errno})
	}
	if fa.outSlot > 0 && f.out != 0 && !failed && !t.replaying(hit) {
		if v, ok := filled(fa, f.out, fa.fields[0].Value, hit); ok {
			fa.fields = append(fa.fields, fetch.Field{Name: fa.slots[fa.outSlot-1].name, Value: v})
		}
	}
	return fa.fields
}

// filled is the buffer at addr that a call filled, as its result says:
// read's bytes (outbuf: the result's count, at most a string's), fgets'
// string (outstr), pipe's descriptors (outfds); false where it filled
// none (fgets' NULL, a failed pipe).
func filled(fa *funcArgs, addr uint64, result fetch.Value, hit *Hit) (fetch.Value, bool) {
	switch fa.slots[fa.outSlot-1].format {
	case "outfds":
		// (The call failed: nothing filled.)
		var fds [8]byte
		if result.Int() != 0 {
			return fetch.Value{}, false
		}
		if n, err := hit.Mem.ReadAt(fds[:], int64(addr)); err != nil || n < len(fds) {
			return fetch.FaultValue(fetch.TypeString), true
		}
		return fetch.DwarfValue(fmt.Sprintf("[%d, %d]", int32(binary.LittleEndian.Uint32(fds[:])), int32(binary.LittleEndian.Uint32(fds[4:])))), true
	case "outstr":
		if result.Uint() == 0 {
			return fetch.Value{}, false
		}
		if s, ok := fetch.ReadString(hit.Mem, addr); ok {
			return fetch.StringValue(s), true
		}
		return fetch.FaultValue(fetch.TypeString), true
	}
	n := min(result.Int(), fetch.MaxStringSize-1)
	if n <= 0 {
		return fetch.StringValue(""), true
	}
	b := make([]byte, n)
	if got, _ := hit.Mem.ReadAt(b, int64(addr)); got < len(b) {
		return fetch.FaultValue(fetch.TypeString), true
	}
	return fetch.StringValue(string(b)), true
}

// failed reports whether result v says the call failed, setting errno,
// where the table says the function does (its "!"): -1, or a pointer
// NULL or of all ones (mmap's MAP_FAILED).
func (fa *funcArgs) failed(v fetch.Value) bool {
	switch {
	case !fa.failsWithErrno || v.Faulted():
		return false
	case v.Type().Signed():
		return v.Int() == -1
	}
	return v.Uint() == ^uint64(0) || v.Uint() == 0
}

// shown is v as --args shows it: an enum's value by its name, a table
// type's by its decoder.
func shown(v fetch.Value, names map[int64]string, format string) fetch.Value {
	if v.Faulted() {
		return v
	}
	if name, ok := names[v.Int()]; ok {
		return fetch.DwarfValue(name)
	}
	return fetch.Decode(format, v)
}
