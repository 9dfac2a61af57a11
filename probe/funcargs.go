package probe

import (
	"fmt"
	"slices"

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
	params *Args            // the fetch-args of the parameters that have a value
	slots  []argSlot        // every parameter, in order
	result *Args            // the result, or nil (void, a float, a struct)
	enum   map[int64]string // the result's names, if an enum
	vals   []Field          // scratch: params' values
	fields []Field          // scratch: what a handler gets, valid during it
}

// argSlot is one parameter: field i of params' values, or text when i < 0;
// an enum's value shows as its name.
type argSlot struct {
	name string
	i    int
	text string
	enum map[int64]string
}

// paramPlace is where a parameter is at the entry: a fetch-arg body with
// its type ("$arg1:s32"), or, with dwarf, its DWARF location if that
// holds at the entry; neither: nowhere we can tell.
type paramPlace struct {
	fetch string
	dwarf bool
}

// compileFuncArgs reads the signature of the function whose entry is at
// runtime address entry in m; nil where m has no DWARF for it.
func compileFuncArgs(m *symbols.Mapped, entry uint64) *funcArgs {
	d, err := m.Debug()
	if err != nil {
		return nil
	}
	sig, err := d.Signature(entry)
	if err != nil {
		return nil
	}
	fa := &funcArgs{}
	places := placeParams(sig.Params)
	var specs, names []string
	for i, p := range sig.Params {
		name := sanitizeArgName(p.Name)
		if name == "" || slices.Contains(names, name) || slices.Contains(reservedFieldNames, name) {
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
		case pl.dwarf && p.Name != "" && validAtEntry(d, entry, p.Name):
			spec = p.Name
		}
		if spec == "" {
			text := "?"
			if p.Class == symbols.ClassAggregate {
				text = "{...}"
			}
			fa.slots = append(fa.slots, argSlot{name: name, i: -1, text: text})
			continue
		}
		fa.slots = append(fa.slots, argSlot{name: name, i: len(specs), enum: p.Enum})
		specs = append(specs, name+"="+spec)
	}
	env := CompileEnv{DWARF: func(expr string) (DwarfVar, error) {
		v, err := d.Var(entry, expr)
		if err != nil {
			return nil, err
		}
		return dwarfVar{v}, nil
	}}
	if fa.params, err = CompileArgs(specs, env); err != nil {
		return nil // a type this table has wrong: no arguments rather than bad ones
	}
	if spec := resultFetch(sig.Result); spec != "" {
		fa.result, _ = CompileArgs([]string{"retval=" + spec}, CompileEnv{Return: true})
		fa.enum = sig.Result.Enum
	}
	return fa
}

// validAtEntry says whether parameter name's DWARF location at the entry
// reads only registers and the words at and above sp (the caller's
// frame), which hold there, and not the function's own frame, which its
// prologue has yet to fill.
func validAtEntry(d *symbols.DebugInfo, entry uint64, name string) bool {
	v, err := d.Var(entry, name)
	return err == nil && dwarfTrial(dwarfVar{v})
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
func (t *Tracer) entryFields(fn *traceFunc, hit *Hit) []Field {
	fa := fn.args
	if fa == nil {
		return nil
	}
	fa.vals = fa.params.Fetch(t.envFor(hit), fa.vals[:0])
	fa.fields = fa.fields[:0]
	for _, s := range fa.slots {
		v := DwarfValue(s.text)
		if s.i >= 0 && s.i < len(fa.vals) {
			v = enumName(fa.vals[s.i].Value, s.enum)
		}
		fa.fields = append(fa.fields, Field{Name: s.name, Value: v})
	}
	return fa.fields
}

// resultFields is fn's result at the hit of its return, or nil.
func (t *Tracer) resultFields(fn *traceFunc, hit *Hit) []Field {
	if fn == nil || fn.args == nil || fn.args.result == nil {
		return nil
	}
	fa := fn.args
	fa.fields = fa.result.Fetch(t.envFor(hit), fa.fields[:0])
	for i := range fa.fields {
		fa.fields[i].Value = enumName(fa.fields[i].Value, fa.enum)
	}
	return fa.fields
}

// enumName is v, or the name of its value when names has one.
func enumName(v Value, names map[int64]string) Value {
	if name, ok := names[v.Int()]; ok && !v.Faulted() {
		return DwarfValue(name)
	}
	return v
}

// envFor is the fetch environment of a hit: a record's, replayed, or a
// stopped thread's.
func (t *Tracer) envFor(hit *Hit) *HitEnv {
	if in := t.inproc; in != nil && hit.Mem == Memory(&in.stack) {
		in.env.Regs, in.env.Comm = hit.Regs, hit.Comm
		return &in.env
	}
	t.env.Regs, t.env.Comm, t.fpTid = hit.Regs, hit.Comm, hit.Tid
	return &t.env
}
