//go:build arm64

package integration

import (
	"encoding/binary"
	"path/filepath"
	"testing"
)

// Pointer authentication (arm64): code built with
// -mbranch-protection=standard signs its return address with paciasp at
// the entry and checks it with autiasp before its ret. The return hook
// replaces x30 before paciasp runs, so the trampoline is what gets
// signed; a detach puts back the original return address signed as the
// trampoline was (probe/retaddr_arm64.go). On a core without pointer
// authentication (cortex-a72) paciasp and autiasp are nops, and the same
// test runs the unsigned way.

func pacCoroBin(t *testing.T) string {
	t.Helper()
	return builtOnce(t, "coro_pac", filepath.Join("testdata", "tracers", "coro.c"), pacFlags...)
}

// TestPointerAuthReturns: coro built with pointer authentication, its
// coroutines' returns hooked, all reported; a detach while each is parked
// inside a hooked call, and every one returns where it should.
func TestPointerAuthReturns(t *testing.T) {
	exe := pacCoroBin(t)
	if !signsReturn(t, exe, "step") {
		t.Fatalf("%s: step does not start with paciasp: the test proves nothing", exe)
	}
	checkCoroReturns(t, exe)
	checkCoroDetach(t, exe)
}

// signsReturn reports whether function fn of path starts with paciasp
// (after a bti, if any).
func signsReturn(t *testing.T, path, fn string) bool {
	t.Helper()
	code := fileBytes(t, path, funcSym(t, path, fn).Value, 8)
	const paciasp = 0xd503233f
	return binary.LittleEndian.Uint32(code) == paciasp || binary.LittleEndian.Uint32(code[4:]) == paciasp
}
