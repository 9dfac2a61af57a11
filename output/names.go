package output

import "strings"

// ShortNames returns a Writer that passes records to w with C++ template
// arguments elided from function names ("std::vector<...>::push_back"),
// as uftrace's simple demangling shows them: the full names of template
// code are often longer than the screen.
func ShortNames(w Writer) Writer { return &shortNames{Writer: w} }

type shortNames struct{ Writer }

func (s *shortNames) Write(r *Record) error {
	f, c, wh := ElideTemplates(r.Func), ElideTemplates(r.Caller), ElideTemplates(r.Where)
	if f == r.Func && c == r.Caller && wh == r.Where && len(r.Stack) == 0 {
		return s.Writer.Write(r)
	}
	short := *r
	short.Func, short.Caller, short.Where = f, c, wh
	if len(r.Stack) > 0 {
		short.Stack = make([]string, len(r.Stack))
		for i, fr := range r.Stack {
			short.Stack[i] = ElideTemplates(fr)
		}
	}
	return s.Writer.Write(&short)
}

// ElideTemplates replaces what each outermost <...> of a C++ name holds
// with "...": "std::map<int, std::string>::find" becomes
// "std::map<...>::find". The operators spelled with < or > (operator<,
// operator<<=, operator->...) are kept as they are.
func ElideTemplates(name string) string {
	if !strings.ContainsRune(name, '<') {
		return name
	}
	var b strings.Builder
	depth := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		if depth == 0 && strings.HasSuffix(name[:i], "operator") {
			// operator<, <<, <=, <=>, <<=, >, >>, >=, >>=, ->, ->*
			j := i
			for j < len(name) && strings.IndexByte("<>=-*", name[j]) >= 0 && j-i < 3 {
				j++
			}
			if j > i {
				b.WriteString(name[i:j])
				i = j - 1
				continue
			}
		}
		switch {
		case c == '<':
			if depth == 0 {
				b.WriteString("<...")
			}
			depth++
		case c == '>' && depth > 0:
			depth--
			if depth == 0 {
				b.WriteByte('>')
			}
		case depth == 0:
			b.WriteByte(c)
		}
	}
	if depth > 0 {
		return name // unbalanced: not a name we understand
	}
	return b.String()
}
