/*
 * reloc_arm64.S: functions whose first instruction depends on where it
 * runs, for the arm64 jump optimisation, which runs the probed
 * instruction from the detour rebuilt with absolute values
 * (codegen/detour_arm64.go). Each takes x0 and returns in x0 what
 * reloc.c sums; the sums are the same traced and untraced only if every
 * rebuilt instruction does what the original does.
 */
	.text
	.p2align 3
	.global f_adrp
	.type f_adrp, %function
f_adrp:	/* table[x0 & 3] */
	adrp x1, table
	add x1, x1, :lo12:table
	and x0, x0, #3
	ldr x0, [x1, x0, lsl #3]
	ret
	.size f_adrp, .-f_adrp

	.global f_adr
	.type f_adr, %function
f_adr:	/* 0x1111 + x0 */
	adr x1, near
	ldr x1, [x1]
	add x0, x0, x1
	ret
near:	.quad 0x1111
	.size f_adr, .-f_adr

	.global f_ldr
	.type f_ldr, %function
f_ldr:	/* x0 + a 64-bit literal */
	ldr x1, lit64
	add x0, x0, x1
	ret
	.p2align 3
lit64:	.quad 0x123456789
	.size f_ldr, .-f_ldr

	.global f_ldrw
	.type f_ldrw, %function
f_ldrw:	/* x0 + a 32-bit literal, zero-extended */
	ldr w1, lit32
	add x0, x0, x1
	ret
lit32:	.word 0xfffffffb
	.size f_ldrw, .-f_ldrw

	.global f_ldrsw
	.type f_ldrsw, %function
f_ldrsw:	/* x0 + the same literal, sign-extended: x0 - 5 */
	ldrsw x1, lit32s
	add x0, x0, x1
	ret
lit32s:	.word 0xfffffffb
	.size f_ldrsw, .-f_ldrsw

	.global f_b
	.type f_b, %function
f_b:	/* a tail call as the first instruction: x0 + 3 */
	b add3
	.size f_b, .-f_b

	.type add3, %function
add3:
	add x0, x0, #3
	ret
	.size add3, .-add3

	.global f_bl
	.type f_bl, %function
f_bl:	/* a call as the first instruction; returns to x9 (call_bl) */
	bl add3
	add x0, x0, #1
	ret x9
	.size f_bl, .-f_bl

	.global call_bl
	.type call_bl, %function
call_bl:	/* f_bl(x0): x0 + 4 */
	stp x29, x30, [sp, #-16]!
	adr x9, 1f
	b f_bl
1:	ldp x29, x30, [sp], #16
	ret
	.size call_bl, .-call_bl

	.global f_cbz
	.type f_cbz, %function
f_cbz:	/* 99 if x0 is 0, else x0 + 10 */
	cbz x0, 1f
	add x0, x0, #10
	ret
1:	mov x0, #99
	ret
	.size f_cbz, .-f_cbz

	.global f_tbnz
	.type f_tbnz, %function
f_tbnz:	/* x0 * 2 if odd, else x0 / 2 */
	tbnz w0, #0, 1f
	lsr x0, x0, #1
	ret
1:	lsl x0, x0, #1
	ret
	.size f_tbnz, .-f_tbnz

	.global f_blt
	.type f_blt, %function
f_blt:	/* 2 if the caller's compare said less than, else 1 */
	b.lt 1f
	mov x0, #1
	ret
1:	mov x0, #2
	ret
	.size f_blt, .-f_blt

	.global call_blt
	.type call_blt, %function
call_blt:	/* f_blt after cmp x0, #5 */
	stp x29, x30, [sp, #-16]!
	cmp x0, #5
	bl f_blt
	ldp x29, x30, [sp], #16
	ret
	.size call_blt, .-call_blt

	.data
	.p2align 3
table:	.quad 7, 11, 13, 17

	.section .note.GNU-stack,"",%progbits
