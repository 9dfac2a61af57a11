package probe

import "golang.org/x/sys/unix"

// sigreturnCode is the code a signal handler returns through (the vDSO's
// __kernel_rt_sigreturn, glibc's and musl's alike: mov x8, #139; svc #0).
var sigreturnCode = [][]byte{{0x68, 0x11, 0x80, 0xd2, 0x01, 0x00, 0x00, 0xd4}}

// sigframePC: on arm64 the return address is a register (x30), saved
// wherever the handler's prologue puts it: no fixed place from it to the
// frame's pc. Any handler on a stack keeps the pages.
const sigframePC = -1

// sigframeRegsAt and sigframeRegPtrs: not followed either
// (rewindSignalFrames).
const sigframeRegsAt = 0

func sigframeRegPtrs(r *unix.PtraceRegs) []*uint64 { return nil }
