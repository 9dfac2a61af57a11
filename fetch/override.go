package fetch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The grammar of an o: probe (probe/override.go): what the function returns
// instead, the errno it sets, and which calls fail.

// Override is what an o: probe makes its function return.
type Override struct {
	Retval    uint64
	HasRetval bool
	// Errno, if not 0, is written into the thread's errno (the C
	// library's thread-local variable).
	Errno int32
	Fail  FailAttr
}

// FailAttr picks which calls that pass the filter fail, as the kernel's
// fault_attr: every Interval-th of them, each with Probability percent,
// at most Times in all.
type FailAttr struct {
	Interval    uint64  // 1: every call
	Probability float64 // percent, 0-100
	Times       int64   // -1: no limit
	Seed        uint64  // of the pseudo-random choice: a run is reproducible
}

// DefaultFailAttr fails every call that passes the filter.
func DefaultFailAttr() FailAttr {
	return FailAttr{Interval: 1, Probability: 100, Times: -1, Seed: 1}
}

// Check says what is wrong with a, naming the setting as the command
// line does.
func (a FailAttr) Check() error {
	switch {
	case a.Interval == 0:
		return errors.New("--fail-every 0: want 1 or more")
	case a.Probability < 0 || a.Probability > 100 || a.Probability != a.Probability:
		return fmt.Errorf("--fail-probability %g: want a percentage from 0 to 100", a.Probability)
	case a.Times < -1:
		return fmt.Errorf("--fail-times %d: want 0 or more (-1: no limit)", a.Times)
	}
	return nil
}

// parseOverride takes an o: probe's $retval=VALUE and errno=ERRNO out of
// its tokens (before any "if"); the rest are fetch-args and the filter.
func parseOverride(tokens []string, bad func(tok, format string, args ...any) error) (*Override, []string, error) {
	o := &Override{Fail: DefaultFailAttr()}
	var rest []string
	for i, tok := range tokens {
		if tok == "if" {
			rest = append(rest, tokens[i:]...)
			break
		}
		name, value, _ := strings.Cut(tok, "=")
		switch name {
		case "$retval":
			v, err := parseRetval(value)
			if err != nil {
				return nil, nil, bad(tok, "want $retval=INTEGER (as -1, 0, 0x10)")
			}
			o.Retval, o.HasRetval = v, true
		case "errno":
			e, err := parseErrno(value)
			if err != nil {
				return nil, nil, bad(tok, "%v", err)
			}
			o.Errno = e
		default:
			rest = append(rest, tok)
		}
	}
	return o, rest, nil
}

func parseRetval(s string) (uint64, error) {
	if v, err := strconv.ParseInt(s, 0, 64); err == nil {
		return uint64(v), nil
	}
	return strconv.ParseUint(s, 0, 64)
}

// parseErrno reads an errno by name (EINTR) or number.
func parseErrno(s string) (int32, error) {
	for e := unix.Errno(1); e < 4096; e++ {
		if unix.ErrnoName(e) == s {
			return int32(e), nil
		}
	}
	if n, err := strconv.ParseUint(s, 10, 12); err == nil && n > 0 && n < 4096 {
		return int32(n), nil
	}
	return 0, fmt.Errorf("unknown errno %q (want a name as EINTR, or a number from 1 to 4095)", s)
}

// ErrnoName is e's name (EINTR), or its number.
func ErrnoName(e int32) string {
	if name := unix.ErrnoName(unix.Errno(e)); name != "" {
		return name
	}
	return strconv.Itoa(int(e))
}

// ErrnoText is the C library's message for errno name (EINTR:
// "Interrupted system call"), or "" for a name it does not know.
func ErrnoText(name string) string {
	e, err := parseErrno(name)
	if err != nil {
		return ""
	}
	msg := unix.Errno(e).Error()
	if msg == "" || strings.HasPrefix(msg, "errno ") {
		return ""
	}
	return strings.ToUpper(msg[:1]) + msg[1:]
}
