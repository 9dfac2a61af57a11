package symbols

import (
	"fmt"
	"strings"
)

// UnknownSymbolError reports a name found in no module, with close names.
type UnknownSymbolError struct {
	Name        string
	Module      string // module searched, "" when the whole space was
	Suggestions []string
}

func (e *UnknownSymbolError) Error() string {
	msg := fmt.Sprintf("unknown symbol %q", e.Name)
	if e.Module != "" {
		msg += " in " + e.Module
	}
	if len(e.Suggestions) > 0 {
		msg += " (did you mean: " + strings.Join(e.Suggestions, ", ") + "?)"
	}
	return msg
}

// UnknownModuleError reports a library name that matches no loaded file.
type UnknownModuleError struct {
	Name   string
	Loaded []string // basenames of the loaded files
}

func (e *UnknownModuleError) Error() string {
	return fmt.Sprintf("unknown library %q (loaded: %s)", e.Name, strings.Join(e.Loaded, ", "))
}

// AmbiguousModuleError reports a library name that matches several files.
type AmbiguousModuleError struct {
	Name       string
	Candidates []string // paths of the matching files
}

func (e *AmbiguousModuleError) Error() string {
	return fmt.Sprintf("ambiguous library %q (matches: %s)", e.Name, strings.Join(e.Candidates, ", "))
}
