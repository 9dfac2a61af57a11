package fetch

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Kind is what a spec asks for.
type Kind int

const (
	KindEntry    Kind = iota // p: an instruction (entry) probe
	KindReturn               // r: a return probe
	KindDelete               // -: remove an event
	KindOverride             // o: skip a function, returning a chosen value (probe/override.go)
)

// DefaultGroup is the event group of probes that name none (kprobes use
// "kprobes", uprobes "uprobes"; ours is "probe").
const DefaultGroup = "probe"

// Spec is one parsed line of the probe grammar, as kprobe_events takes it:
//
//	p[:[GRP/]EVENT] LOCATION [FETCHARG ...]
//	r[:[GRP/]EVENT] LOCATION [FETCHARG ...]
//	-:[GRP/]EVENT
//	o[:[GRP/]EVENT] FUNC $retval=VALUE [errno=ERRNO] [FETCHARG ...]
//
// plus the short form p:LOCATION used on the command line.
type Spec struct {
	Text  string // as written
	Kind  Kind
	Group string
	Event string // derived from the location when not given
	Loc   Location
	Args  []string // fetch-arg tokens, compiled when the probe is added
	// Override is what an o: probe makes its function return.
	Override *Override
}

// Location is where a probe goes; exactly one form is set.
type Location struct {
	Module     string // MOD of MOD:SYM, or the PATH of PATH:0xOFFSET
	Symbol     string
	Offset     uint64 // from Symbol
	Addr       uint64 // 0xADDR: a runtime address
	FileOffset uint64 // PATH:0xOFFSET: an offset in the ELF file
	HasFileOff bool
	File       string // FILE:LINE (DWARF line table)
	Line       int    // with File: the line; with Symbol: FUNC:RLINE, relative to the function's first line (as perf probe)
	HasLine    bool
	// SDT: a <sys/sdt.h> probe (sdt:[MOD:]PROVIDER:NAME), each a glob;
	// Module, if set, the file that has it.
	SDT            bool
	Provider, Name string
}

func (l Location) String() string {
	var b strings.Builder
	if l.Module != "" {
		b.WriteString(l.Module + ":")
	}
	switch {
	case l.SDT:
		b.WriteString(l.Provider + ":" + l.Name)
	case l.File != "":
		fmt.Fprintf(&b, "%s:%d", l.File, l.Line)
	case l.HasLine:
		fmt.Fprintf(&b, "%s:%d", l.Symbol, l.Line)
	case l.HasFileOff:
		fmt.Fprintf(&b, "%#x", l.FileOffset)
	case l.Symbol != "":
		b.WriteString(l.Symbol)
		// MOD:123 would read as FUNC:LINE; an offset keeps it a symbol.
		if _, numeric := strconv.ParseUint(l.Symbol, 10, 31); l.Offset != 0 || l.Module != "" && numeric == nil {
			fmt.Fprintf(&b, "+%#x", l.Offset)
		}
	default:
		fmt.Fprintf(&b, "%#x", l.Addr)
	}
	return b.String()
}

// SpecError is bad input in a spec; Token is the part that is wrong.
type SpecError struct {
	Spec, Token, Reason string
}

// Is makes every SpecError an ErrBadInput.
func (e *SpecError) Is(target error) bool { return target == ErrBadInput }

func (e *SpecError) Error() string {
	if e.Token == "" || e.Token == e.Spec {
		return fmt.Sprintf("bad probe %q: %s", e.Spec, e.Reason)
	}
	return fmt.Sprintf("bad probe %q: %q: %s", e.Spec, e.Token, e.Reason)
}

// ParseSpec parses one probe definition.
func ParseSpec(text string) (*Spec, error) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return nil, &SpecError{Spec: text, Reason: "empty probe definition"}
	}
	bad := func(tok, format string, args ...any) error {
		return &SpecError{Spec: text, Token: tok, Reason: fmt.Sprintf(format, args...)}
	}
	head, rest := fields[0], fields[1:]
	s := &Spec{Text: text, Group: DefaultGroup}
	typ, name, hasName := strings.Cut(head, ":")
	switch typ {
	case "p":
		s.Kind = KindEntry
	case "r":
		s.Kind = KindReturn
	case "-":
		s.Kind = KindDelete
	case "o":
		s.Kind = KindOverride
	case "sdt", "usdt":
		return parseSDTSpec(s, name, rest, bad)
	default:
		return nil, bad(typ, "unknown probe type (want p:, r:, o:, sdt: or -:)")
	}
	if hasName && name == "" {
		return nil, bad(head, "missing location or event name after %q", typ+":")
	}

	// p:GRP/EVENT LOCATION names the event; p:LOCATION is the short form.
	// An event name is told apart by its slash, which no location has
	// before a colon.
	var locTok string
	switch {
	case s.Kind == KindDelete:
		if !hasName || len(rest) > 0 {
			return nil, bad(text, "want -:[GRP/]EVENT")
		}
		if err := s.setName(name); err != nil {
			return nil, bad(name, "%v", err)
		}
		return s, nil
	case hasName && isEventName(name):
		if err := s.setName(name); err != nil {
			return nil, bad(name, "%v", err)
		}
		if len(rest) == 0 {
			return nil, bad(text, "missing location after event name %q", name)
		}
		locTok, rest = rest[0], rest[1:]
	case hasName:
		locTok = name
	default:
		if len(rest) == 0 {
			return nil, bad(text, "missing location")
		}
		locTok, rest = rest[0], rest[1:]
	}

	if l, ok := strings.CutSuffix(locTok, "%return"); ok && s.Kind != KindOverride {
		if s.Kind == KindEntry {
			s.Kind = KindReturn
		}
		locTok = l
	}
	loc, err := ParseLocation(locTok)
	if err != nil {
		return nil, bad(locTok, "%v", err)
	}
	s.Loc = loc
	if s.Kind == KindOverride {
		if s.Override, rest, err = parseOverride(rest, bad); err != nil {
			return nil, err
		}
		if loc.Symbol == "" || loc.Offset != 0 || loc.HasLine || loc.File != "" {
			return nil, bad(locTok, "an o: probe goes on a function's entry: name the function, with no +offset or line")
		}
	}
	if len(rest) > 0 {
		s.Args = rest
	}
	if s.Event == "" {
		s.Event = defaultEventName(s.Kind, loc)
	}
	return s, nil
}

// parseSDTSpec parses the rest of sdt:[MOD:]PROVIDER:NAME [FETCHARGS]
// (bpftrace's usdt:PATH:PROVIDER:NAME and usdt:PATH:NAME too): an entry
// probe at each site
// of the matching notes, its event PROVIDER/NAME in group sdt_PROVIDER,
// as perf names them.
func parseSDTSpec(s *Spec, loc string, rest []string, bad func(tok, format string, args ...any) error) (*Spec, error) {
	s.Kind = KindEntry
	parts := strings.Split(loc, ":")
	var mod string
	switch len(parts) {
	case 2:
		if strings.Contains(parts[0], "/") {
			// bpftrace's usdt:PATH:NAME: any provider of the file.
			mod, parts = parts[0], []string{"*", parts[1]}
		}
	case 3:
		if mod, parts = parts[0], parts[1:]; mod == "" {
			return nil, bad(loc, "want sdt:[MOD:]PROVIDER:NAME")
		}
	default:
		return nil, bad(loc, "want sdt:[MOD:]PROVIDER:NAME")
	}
	if parts[0] == "" || parts[1] == "" {
		return nil, bad(loc, "want sdt:[MOD:]PROVIDER:NAME")
	}
	s.Loc = Location{Module: mod, SDT: true, Provider: parts[0], Name: parts[1]}
	s.Group, s.Event = SDTEventName(parts[0], parts[1])
	if len(rest) > 0 {
		s.Args = rest
	}
	return s, nil
}

// SDTEventName is the group and event of an SDT probe's events.
func SDTEventName(provider, name string) (group, event string) {
	return "sdt_" + sanitize(provider), sanitize(name)
}

// MatchesSDT reports whether an SDT location's globs match the probe
// provider:name.
func (l Location) MatchesSDT(provider, name string) bool {
	return GlobMatch(l.Provider, provider) && GlobMatch(l.Name, name)
}

// IsGlob reports whether an SDT location names more than one probe.
func (l Location) IsGlob() bool {
	return l.SDT && strings.ContainsAny(l.Provider+l.Name, "*?[")
}

// isEventName reports whether the part after "p:" is GRP/EVENT rather
// than a location. Both halves must be identifiers, which keeps paths
// (/bin/ls:0x10) and Go symbols (example.com/pkg.Func) on the location side.
func isEventName(s string) bool {
	grp, ev, ok := strings.Cut(s, "/")
	return ok && isIdent(grp) && isIdent(ev)
}

func (s *Spec) setName(name string) error {
	grp, ev, ok := strings.Cut(name, "/")
	if !ok {
		grp, ev = "", name
	}
	if grp != "" {
		if !isIdent(grp) {
			return fmt.Errorf("group name must be letters, digits and _")
		}
		s.Group = grp
	}
	if !isIdent(ev) {
		return fmt.Errorf("event name must be letters, digits and _")
	}
	s.Event = ev
	return nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if !isIdentChar(s[i]) || i == 0 && !isIdentStart(s[i]) {
			return false
		}
	}
	return true
}

// moduleColon is where MOD: ends in a location, or -1: the last colon
// that is not half of a C++ "::" (Rect::area, prog:ns::f).
func moduleColon(tok string) int {
	for i := len(tok) - 1; i >= 0; i-- {
		if tok[i] != ':' {
			continue
		}
		if i > 0 && tok[i-1] == ':' {
			i-- // a "::": skip both
			continue
		}
		if i+1 < len(tok) && tok[i+1] == ':' {
			continue
		}
		return i
	}
	return -1
}

// ParseLocation parses a probe's location, as ParseSpec does.
func ParseLocation(tok string) (Location, error) {
	var loc Location
	if tok == "" {
		return loc, fmt.Errorf("empty location")
	}
	if strings.HasPrefix(tok, "0x") || strings.HasPrefix(tok, "0X") {
		addr, err := strconv.ParseUint(tok[2:], 16, 64)
		if err != nil {
			return loc, fmt.Errorf("bad address")
		}
		loc.Addr = addr
		return loc, nil
	}
	if i := moduleColon(tok); i >= 0 {
		mod, what := tok[:i], tok[i+1:]
		if mod == "" || what == "" {
			return loc, fmt.Errorf("want MOD:SYM[+OFFS] or PATH:0xOFFSET")
		}
		loc.Module = mod
		if strings.HasPrefix(what, "0x") {
			off, err := strconv.ParseUint(what[2:], 16, 64)
			if err != nil {
				return loc, fmt.Errorf("bad file offset %q", what)
			}
			loc.FileOffset, loc.HasFileOff = off, true
			return loc, nil
		}
		if line, err := strconv.ParseUint(what, 10, 31); err == nil {
			return lineLocation(mod, int(line))
		}
		tok = what
	}
	sym, offText, hasOff := strings.Cut(tok, "+")
	if sym == "" {
		return loc, fmt.Errorf("missing symbol name")
	}
	if strings.ContainsAny(sym, "=%@$\\") {
		return loc, fmt.Errorf("not a symbol name")
	}
	loc.Symbol = sym
	if hasOff {
		off, err := strconv.ParseUint(offText, 0, 64)
		if err != nil {
			return loc, fmt.Errorf("bad offset %q (want decimal or 0x hex)", offText)
		}
		loc.Offset = off
	}
	return loc, nil
}

// lineLocation reads X:LINE: FILE:LINE when X looks like a source file (a
// path, or a source extension), else FUNC:RLINE.
func lineLocation(x string, line int) (Location, error) {
	if strings.Contains(x, "/") || isSourceFile(x) {
		return Location{File: x, Line: line, HasLine: true}, nil
	}
	if strings.ContainsAny(x, "=%@$\\+") {
		return Location{}, fmt.Errorf("want FILE:LINE or FUNC:LINE")
	}
	return Location{Symbol: x, Line: line, HasLine: true}, nil
}

func isSourceFile(name string) bool {
	switch filepath.Ext(name) {
	case ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".go", ".s", ".S", ".rs", ".m":
		return true
	}
	return false
}

// defaultEventName follows the kernel: p_SYMBOL_OFFSET, p_0xADDRESS, and
// p_FILE_0xOFFSET for file offsets, with characters an event name cannot
// hold turned into underscores.
func defaultEventName(kind Kind, loc Location) string {
	prefix := "p_"
	switch kind {
	case KindReturn:
		prefix = "r_"
	case KindOverride:
		prefix = "o_"
	}
	var name string
	switch {
	case loc.File != "":
		name = fmt.Sprintf("%s_L%d", strings.TrimSuffix(filepath.Base(loc.File), filepath.Ext(loc.File)), loc.Line)
	case loc.HasLine:
		name = fmt.Sprintf("%s_L%d", loc.Symbol, loc.Line)
	case loc.HasFileOff:
		name = fmt.Sprintf("%s_0x%x", filepath.Base(loc.Module), loc.FileOffset)
	case loc.Symbol != "":
		name = fmt.Sprintf("%s_%d", loc.Symbol, loc.Offset)
	default:
		name = fmt.Sprintf("0x%x", loc.Addr)
	}
	return prefix + sanitize(name)
}

func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return string(b)
}
