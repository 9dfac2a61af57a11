package codegen

import "errors"

// On arm64 the tracer generates record stubs and their detours
// (record_arm64.go, detour_arm64.go), not yet the mailbox, return hooks,
// tallies, filters or memory reads: those probes trap. The stand-ins
// below keep the tracer building; it never reaches them on arm64.

var errNoCodegen = errors.New("not on arm64 yet: the probe traps (brk)")

// JumpSize is the length of the `b` a jump-optimised probe writes.
const JumpSize = 4

func (s *MailboxStub) Size() int { return 0 }
func (s *MailboxStub) Code(at uint64) (code []byte, id uint64, err error) {
	return nil, 0, errNoCodegen
}
func (r *MailboxRoutine) Size() int { return 0 }
func (r *MailboxRoutine) Code(at uint64) (code []byte, l RoutineLayout, err error) {
	return nil, l, errNoCodegen
}
