package singlestep

import "errors"

// On arm64 the tracer generates no code into the tracee yet: every probe
// is a brk served by the tracer. PlanDetour, the only way in, refuses;
// the rest exists so that the tracer builds, and is never reached (the
// tracer keeps the mailbox, jump optimisation and in-process recording
// off on arm64).

var errNoCodegen = errors.New("not on arm64 yet: the probe traps (brk)")

// PlanDetour refuses: no jump optimisation on arm64.
func PlanDetour(fn []byte, fnAddr, addr uint64, tables TableReader) (*Detour, error) {
	return nil, errNoCodegen
}

func (d *Detour) SavesR11() bool                                       { return false }
func (d *Detour) CopyOf(k int, detour uint64) uint64                   { return 0 }
func (d *Detour) Redirected(r Redirect, detour uint64) ([]byte, error) { return nil, errNoCodegen }
func (d *Detour) Size() int                                            { return 0 }
func (d *Detour) Trap(detour uint64) uint64                            { return 0 }
func (d *Detour) Skip(detour uint64) uint64                            { return 0 }
func (d *Detour) Copies(detour uint64) uint64                          { return 0 }
func (d *Detour) Code(detour uint64) ([]byte, error)                   { return nil, errNoCodegen }
func (d *Detour) Jump(detour uint64) ([]byte, error)                   { return nil, errNoCodegen }
func (d *Detour) Original(rip, detour uint64) (orig uint64, savedR11, ok bool) {
	return 0, false, false
}

func (s *MailboxStub) Size() int { return 0 }
func (s *MailboxStub) Code(at uint64) (code []byte, id uint64, err error) {
	return nil, 0, errNoCodegen
}
func (r *MailboxRoutine) Size() int { return 0 }
func (r *MailboxRoutine) Code(at uint64) (code []byte, l RoutineLayout, err error) {
	return nil, l, errNoCodegen
}

func (r *RecordRoutine) Size() int                        { return 0 }
func (r *RecordRoutine) Code(at uint64) ([]byte, error)   { return nil, errNoCodegen }
func (s *RecordStub) Len() int                            { return 0 }
func (s *RecordStub) Size() int                           { return 0 }
func (s *RecordStub) Code(at uint64) ([]byte, error)      { return nil, errNoCodegen }
func (s *RecordStub) Fixup(at, rip uint64) (uint64, bool) { return 0, false }
func (s *RecordStub) Rewind(at, rip, rsp uint64) (StubRewind, bool) {
	return StubRewind{}, false
}

func HookRoutine(at uint64) uint64    { return 0 }
func Trampoline(at uint64) uint64     { return 0 }
func TrampolineTrap(at uint64) uint64 { return 0 }
func TallyRoutine(at uint64) uint64   { return 0 }
func TrampolineRewind(at, rip, rsp uint64, called bool) (StubRewind, bool) {
	return StubRewind{}, false
}
func RoutineRewind(rsp uint64) StubRewind { return StubRewind{} }
func SavedRegs() []int                    { return nil }
func RecordableReg(off int) bool          { return false }
