// Package testhex parses the hex bytes that tests write machine code in,
// for the tests of more than one package (singlestep, codegen).
//
//	code := testhex.Bytes(t, "48 89 e5") // mov %rsp,%rbp
package testhex

import (
	"encoding/hex"
	"strings"
	"testing"
)

// Bytes parses hex bytes written with spaces, e.g. "48 89 e5"; a bad
// string fails the test.
func Bytes(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}
