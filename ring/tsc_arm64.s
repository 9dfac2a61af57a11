#include "textflag.h"

// func rdtsc() uint64: on arm64 the virtual count of the generic timer,
// which runs at a constant rate on every core.
TEXT ·rdtsc(SB),NOSPLIT,$0-8
	ISB	$15
	MRS	CNTVCT_EL0, R0
	MOVD	R0, ret+0(FP)
	RET

// func tscHz() uint64: the generic timer's frequency (CNTFRQ_EL0), which
// the firmware sets and user space may read.
TEXT ·tscHz(SB),NOSPLIT,$0-8
	MRS	CNTFRQ_EL0, R0
	MOVD	R0, ret+0(FP)
	RET
