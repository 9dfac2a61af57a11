#include "textflag.h"

// func rdtsc() uint64
TEXT ·rdtsc(SB),NOSPLIT,$0-8
	RDTSC
	SHLQ	$32, DX
	ORQ	DX, AX
	MOVQ	AX, ret+0(FP)
	RET

// func tscHz() uint64: not known on x86-64 (the clock calibrates).
TEXT ·tscHz(SB),NOSPLIT,$0-8
	MOVQ	$0, ret+0(FP)
	RET
