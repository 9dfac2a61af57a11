package fetch

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// SDT probes' arguments. A <sys/sdt.h> note spells each argument as
// [-]SIZE@OPERAND: its size in bytes, signed when negative, and the
// operand the compiler chose, in the assembler's syntax: "-4@%eax",
// "8@-80(%rbx)", "8@$5", "4@counter(%rip)" on x86-64, "8@x0",
// "-4@[sp, 12]", "8@[x19]" on arm64. Each becomes a fetch-arg ("%eax:s32",
// "-80(%rbx):u64") that $argN in a probe's fetch-args stands for.

// SDTArg is one argument of an SDT probe: the fetch-arg it is, without a
// type, and its type (u64, s32...); Err if the operand is one a fetch-arg
// cannot read (an indexed address: 8@(%rax,%rdx,8)).
type SDTArg struct {
	Fetch, Type string
	Err         error
}

// ParseSDTArgs reads a note's argument string.
func ParseSDTArgs(text string) []SDTArg {
	var out []SDTArg
	for _, op := range sdtOperands(text) {
		out = append(out, parseSDTArg(op))
	}
	return out
}

// sdtOperands splits an argument string at its spaces, but for those
// inside an arm64 [base, offset].
func sdtOperands(text string) []string {
	var out []string
	depth, start := 0, -1
	for i := 0; i <= len(text); i++ {
		if i == len(text) || text[i] == ' ' && depth == 0 {
			if start >= 0 {
				out = append(out, text[start:i])
				start = -1
			}
			continue
		}
		switch text[i] {
		case '[':
			depth++
		case ']':
			depth--
		}
		if start < 0 {
			start = i
		}
	}
	return out
}

var (
	sdtMemX86   = regexp.MustCompile(`^(-?(?:0x[0-9a-fA-F]+|\d+))?\(%(\w+)\)$`)
	sdtIdxX86   = regexp.MustCompile(`^(-?(?:0x[0-9a-fA-F]+|\d+))?\((%\w+)?,(%\w+)(?:,([1248]))?\)$`)
	sdtSymX86   = regexp.MustCompile(`^([A-Za-z_.][\w.$]*)([+-](?:0x[0-9a-fA-F]+|\d+))?\(%rip\)$`)
	sdtMemArm64 = regexp.MustCompile(`^\[(\w+)(?:,\s*#?(-?(?:0x[0-9a-fA-F]+|\d+)))?\]$`)
)

func parseSDTArg(op string) SDTArg {
	typ := "s64" // no size: a long
	if size, rest, ok := strings.Cut(op, "@"); ok {
		n, err := strconv.Atoi(size)
		bits := map[int]string{1: "8", 2: "16", 4: "32", 8: "64"}[max(n, -n)]
		if err != nil || bits == "" {
			return SDTArg{Err: fmt.Errorf("argument %q: bad size %q", op, size)}
		}
		typ = "u" + bits
		if n < 0 {
			typ = "s" + bits
		}
		op = rest
	}
	bad := SDTArg{Err: fmt.Errorf("argument %q: an operand a fetch-arg cannot read", op)}
	reg := func(name string) (string, bool) {
		if _, ok := fetchRegs[name]; ok {
			return "%" + name, true
		}
		return "", false
	}
	switch {
	case strings.HasPrefix(op, "%"):
		if r, ok := reg(op[1:]); ok {
			return SDTArg{Fetch: r, Type: typ}
		}
	case strings.HasPrefix(op, "$"):
		if _, ok := parseImmediate(op[1:]); ok {
			return SDTArg{Fetch: `\` + op[1:], Type: typ}
		}
	case sdtMemX86.MatchString(op):
		m := sdtMemX86.FindStringSubmatch(op)
		if r, ok := reg(m[2]); ok {
			return SDTArg{Fetch: signedOffset(m[1]) + "(" + r + ")", Type: typ}
		}
	case sdtIdxX86.MatchString(op):
		// An array's element: the fetch-arg's indexed address.
		m := sdtIdxX86.FindStringSubmatch(op)
		_, baseOK := reg(strings.TrimPrefix(m[2], "%"))
		if _, ok := reg(m[3][1:]); ok && (m[2] == "" || baseOK) {
			return SDTArg{Fetch: signedOffset(m[1]) + "(" + m[2] + "," + m[3] + "," + cmp.Or(m[4], "1") + ")", Type: typ}
		}
	case sdtSymX86.MatchString(op):
		m := sdtSymX86.FindStringSubmatch(op)
		return SDTArg{Fetch: "@" + m[1] + m[2], Type: typ}
	case sdtMemArm64.MatchString(op):
		m := sdtMemArm64.FindStringSubmatch(op)
		if r, ok := reg(m[1]); ok {
			return SDTArg{Fetch: signedOffset(m[2]) + "(" + r + ")", Type: typ}
		}
	default:
		if r, ok := reg(op); ok { // arm64: x0, w1, sp
			return SDTArg{Fetch: r, Type: typ}
		}
		if _, ok := parseImmediate(strings.TrimPrefix(op, "#")); ok {
			return SDTArg{Fetch: `\` + strings.TrimPrefix(op, "#"), Type: typ}
		}
	}
	return bad
}

// signedOffset spells an operand's displacement as a dereference's:
// +N or -N.
func signedOffset(off string) string {
	if strings.HasPrefix(off, "-") {
		return off
	}
	if off == "" {
		off = "0"
	}
	return "+" + off
}

// sdtArgRef finds $argN (N from 1) in a fetch-arg.
var sdtArgRef = regexp.MustCompile(`\$arg(\d+)\b`)

// SDTFetchArgs turns a probe's fetch-args into those of one SDT site
// whose arguments are args: $argN stands for the site's Nth argument, a
// fetch-arg that is $argN alone (or NAME=$argN) takes its type unless it
// gives one, and one named by nothing else is named argN; $argN:string
// is the string the argument points at (bpftrace's str(argN)). With no
// fetch-args (a filter alone), every argument is fetched, as arg1,
// arg2... (as perf's sdt events record them).
func SDTFetchArgs(tokens []string, args []SDTArg) ([]string, error) {
	if len(tokens) == 0 || tokens[0] == "if" {
		var all []string
		for i, a := range args {
			if a.Err != nil {
				continue // (not asked for: left out)
			}
			all = append(all, fmt.Sprintf("arg%d=%s:%s", i+1, a.Fetch, a.Type))
		}
		return append(all, tokens...), nil // (a filter reads them by name)
	}
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		var err error
		name, fetch, named := strings.Cut(tok, "=")
		if !named || strings.ContainsAny(name, "($%+-") {
			name, fetch, named = "", tok, false
		}
		whole := sdtArgRef.FindStringSubmatchIndex(fetch)
		if whole != nil && whole[0] == 0 && (whole[1] == len(fetch) || fetch[whole[1]] == ':') {
			// $argN[:TYPE]: the argument, typed as the note says unless
			// the fetch-arg says.
			a, aerr := sdtArgAt(args, fetch[whole[2]:whole[3]])
			if aerr != nil {
				return nil, aerr
			}
			typ, at := ":"+a.Type, a.Fetch
			if whole[1] < len(fetch) {
				typ = fetch[whole[1]:]
			}
			if strings.HasPrefix(typ, ":string") || strings.HasPrefix(typ, ":ustring") {
				at = "+0(" + at + ")" // a char *: the string it points at
			}
			if !named {
				name = fetch[1:whole[1]]
			}
			out[i] = name + "=" + at + typ
			continue
		}
		sub := sdtArgRef.ReplaceAllStringFunc(fetch, func(ref string) string {
			a, aerr := sdtArgAt(args, ref[len("$arg"):])
			if aerr != nil && err == nil {
				err = aerr
			}
			return a.Fetch
		})
		if err != nil {
			return nil, err
		}
		if named {
			sub = name + "=" + sub
		}
		out[i] = sub
	}
	return out, nil
}

func sdtArgAt(args []SDTArg, n string) (SDTArg, error) {
	i, err := strconv.Atoi(n)
	if err != nil || i < 1 || i > len(args) {
		return SDTArg{}, fmt.Errorf("$arg%s: the probe has %d argument%s", n, len(args), map[bool]string{true: "", false: "s"}[len(args) == 1])
	}
	if a := args[i-1]; a.Err != nil {
		return SDTArg{}, fmt.Errorf("$arg%d: %w", i, a.Err)
	}
	return args[i-1], nil
}
