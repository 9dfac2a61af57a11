package symbols

import (
	"regexp"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// cloneRE finds the clone suffixes the demangler prints after the
// parameters: "f(int) [clone .isra.0] [clone .cold]".
var cloneRE = regexp.MustCompile(`\[clone (\.[^\]]+)\]`)

// DisplayName returns a mangled C++ (or Rust) name demangled, without the
// function's parameters; any other name (C, Go) comes back unchanged.
// Clone suffixes and symbol versions stay, so that distinct symbols keep
// distinct names.
//
//	symbols.DisplayName("_ZN2ns7Thrower5throwEi")    // "ns::Thrower::throw"
//	symbols.DisplayName("_Z7throweri.cold@VERS_1.0") // "thrower.cold@VERS_1.0"
func DisplayName(name string) string {
	base, version := name, ""
	if i := strings.IndexByte(name, '@'); i > 0 {
		base, version = name[:i], name[i:]
	}
	if !strings.HasPrefix(base, "_Z") && !strings.HasPrefix(base, "_R") {
		return name // the common case, without a parse
	}
	s, err := demangle.ToString(base, demangle.NoParams, demangle.NoEnclosingParams)
	if err != nil {
		return name
	}
	if strings.IndexByte(base, '.') >= 0 {
		// NoParams drops clone suffixes too; the full form names them.
		if full, err := demangle.ToString(base, demangle.NoEnclosingParams); err == nil {
			for _, m := range cloneRE.FindAllStringSubmatch(full, -1) {
				s += m[1]
			}
		}
	}
	return s + version
}
