package output

import "errors"

// Tee returns a Writer that passes every call to each of ws in turn, as
// --tracer function_graph,profile needs.
func Tee(ws ...Writer) Writer { return tee(ws) }

type tee []Writer

// each calls f on every writer, even after one fails, so that one broken
// output does not starve the others.
func (t tee) each(f func(Writer) error) error {
	var errs []error
	for _, w := range t {
		if err := f(w); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (t tee) Write(r *Record) error  { return t.each(func(w Writer) error { return w.Write(r) }) }
func (t tee) Comment(s string) error { return t.each(func(w Writer) error { return w.Comment(s) }) }
func (t tee) Flush() error           { return t.each(Writer.Flush) }
func (t tee) Finish() error          { return t.each(Writer.Finish) }
