/* The instruction forms probe runs displaced (emulated, boosted from an
 * XOL slot, or single-stepped there), each at a label the test probes.
 *
 * x_NAME   a form, called by run_form with every general register and the
 *          arithmetic flags loaded from a struct regs, and every register
 *          and the flags saved back after it returns (exact.c folds them
 *          into a checksum per form).
 * h_NAME   a helper a form calls.
 * ra_NAME  a helper that reads its own return address: no return probe
 *          may go on it (a return probe rewrites that address).
 *
 * Labels name the instructions under test; their prefix says how many
 * times each call of the form executes them, which the test checks
 * against the hit count of a probe there:
 *   at_NAME    once per call
 *   atK_NAME   K times per call (K a decimal number)
 *   atn_NAME   as many times as exact.c reports ("hits NAME K")
 *
 * Every form may clobber every register but rsp, which must come back as
 * it was. Forms that move rsp off the stack keep the real one in the
 * thread-local form_sp, so no register holds a stack address there.
 */
	.section .tbss,"awT",@nobits
	.p2align 3
form_sp:
	.zero 8

	.data
	.p2align 4
	.globl gdata
gdata:
	.quad 0x0123456789abcdef, 0xfedcba9876543210, 0x0000000000000007, 0x8000000000000001
	.globl gfnptr
gfnptr:
	.quad ra_check
gjmptab:
	.quad h_jmp_target
pattern:
	.ascii "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ+/"
	/* Written only by the store forms, which exact.c runs under a lock. */
	.globl gstore
gstore:
	.quad 0, 0, 0, 0

	.text

.macro FORM name
	.globl \name
	.type \name,@function
	.p2align 4
\name:
.endm
.macro END name
	.size \name, .-\name
.endm

/* void run_form(void (*fn)(void), struct regs *r)
 * struct regs: rax rbx rcx rdx rsi rdi rbp r8-r15 flags sp_in sp_out */
FORM run_form
	push %rbp
	push %rbx
	push %r12
	push %r13
	push %r14
	push %r15
	sub $8, %rsp
	push %rsi
	push %rdi
	mov %rsp, 128(%rsi)
	pushq 120(%rsi)
	popfq
	mov 0(%rsi), %rax
	mov 8(%rsi), %rbx
	mov 16(%rsi), %rcx
	mov 24(%rsi), %rdx
	mov 40(%rsi), %rdi
	mov 48(%rsi), %rbp
	mov 56(%rsi), %r8
	mov 64(%rsi), %r9
	mov 72(%rsi), %r10
	mov 80(%rsi), %r11
	mov 88(%rsi), %r12
	mov 96(%rsi), %r13
	mov 104(%rsi), %r14
	mov 112(%rsi), %r15
	mov 32(%rsi), %rsi
	call *(%rsp)
	push %rsi
	mov 16(%rsp), %rsi
	mov %rax, 0(%rsi)
	mov %rbx, 8(%rsi)
	mov %rcx, 16(%rsi)
	mov %rdx, 24(%rsi)
	popq 32(%rsi)
	mov %rdi, 40(%rsi)
	mov %rbp, 48(%rsi)
	mov %r8, 56(%rsi)
	mov %r9, 64(%rsi)
	mov %r10, 72(%rsi)
	mov %r11, 80(%rsi)
	mov %r12, 88(%rsi)
	mov %r13, 96(%rsi)
	mov %r14, 104(%rsi)
	mov %r15, 112(%rsi)
	pushfq
	popq 120(%rsi)
	mov %rsp, 136(%rsi)
	cld
	add $24, %rsp
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %rbx
	pop %rbp
	ret
END run_form

/* ---- push and pop of each register class ---------------------------- */

.macro PUSHPOP reg
FORM x_pushpop_\reg
at_push_\reg:
	push %\reg
	mov $0x1111, %\reg
	mov (%rsp), %rax
at_pop_\reg:
	pop %\reg
	ret
END x_pushpop_\reg
.endm
	PUSHPOP rbp
	PUSHPOP rbx
	PUSHPOP r12
	PUSHPOP r13
	PUSHPOP r14
	PUSHPOP r15
	PUSHPOP rdi
	PUSHPOP r8

FORM x_push_rsp
at_push_rsp:
	push %rsp
	mov (%rsp), %rax
	sub %rsp, %rax		/* 8: push %rsp pushes the value before the decrement */
	push %rax
at_pop_rax:
	pop %rax
at_pop_rsp:
	pop %rsp		/* the popped value wins over the increment */
	ret
END x_push_rsp

FORM x_push_imm
at_push_imm8:
	push $-5
at_push_imm32:
	push $0x12345678
at_push_rip:
	pushq gdata+8(%rip)
	pop %rax
	pop %rbx
at_pushw:
	pushw %si
at_popw:
	popw %cx
	pop %rdx
	ret
END x_push_imm

/* ---- mov between registers ------------------------------------------ */

FORM x_mov_rsp_rbp
	push %rbp
at_mov_rsp_rbp:
	mov %rsp, %rbp
	mov %rbp, %rax
	sub %rsp, %rax
	sub $0x20, %rsp
	movq %rdi, -8(%rbp)
at_mov_rbp_rsp:
	mov %rbp, %rsp
	mov -8(%rsp), %rdx
	pop %rbp
	cmp %rdi, %rsi		/* flags that do not depend on where the stack is */
	ret
END x_mov_rsp_rbp

FORM x_mov_regs
at_mov_rdi_rax:
	mov %rdi, %rax
at_mov_8b:
	.byte 0x48, 0x8b, 0xcf	/* mov %rdi,%rcx, the other encoding */
at_mov_r12_r15:
	mov %r12, %r15
at_mov_rax_r8:
	mov %rax, %r8
at_mov_r13_r13:
	mov %r13, %r13
at_mov_esi_edx:
	mov %esi, %edx		/* 32-bit: zero-extends */
at_mov_r9d_r10d:
	mov %r9d, %r10d
at_mov_si_bx:
	mov %si, %bx		/* 16-bit: keeps the upper bits */
at_mov_rsp_r11:
	mov %rsp, %r11
	sub %rsp, %r11
at_movabs:
	movabs $0x1122334455667788, %r14
	ret
END x_mov_regs

/* leave, after a frame */
FORM x_leave
	push %rbp
	mov %rsp, %rbp
	sub $0x30, %rsp
	mov %rsi, -0x28(%rbp)
at_leave:
	leave
	mov -0x30(%rsp), %rax
	cmp %rax, %rdi
	ret
END x_leave

/* ---- add/sub rsp, imm8 and imm32, the flags they set ----------------- */

/* RSPARITH name, insn: rsp = rdi (any value; nothing touches memory while
 * it is there), the instruction, a jcc on its flags, then every flag in
 * rax (lahf, seto) and the result in rdx. */
.macro RSPARITH name, insn, jcc
FORM x_\name
	movq %rsp, %fs:form_sp@tpoff
	mov %rdi, %rsp
at_\name:
	\insn
at_\name\()_jcc:
	\jcc 1f
	mov $1, %ecx
	jmp 2f
1:	mov $2, %ecx
2:	lahf
	seto %al
	mov %rsp, %rdx
	movq %fs:form_sp@tpoff, %rsp
	ret
END x_\name
.endm
	RSPARITH sub_rsp_imm8, "sub $0x18, %rsp", jb
	RSPARITH sub_rsp_imm32, "sub $0x1238, %rsp", jo
	RSPARITH add_rsp_imm8, "add $0x48, %rsp", jae
	RSPARITH add_rsp_imm32, "add $0x1000, %rsp", jz
	RSPARITH add_rsp_neg8, "add $-128, %rsp", js
	RSPARITH sub_rsp_neg8, "sub $-128, %rsp", jp
	RSPARITH sub_rsp_neg32, "sub $-0x80000000, %rsp", jl
	RSPARITH add_rsp_neg32, "add $-0x1000, %rsp", jg

/* The same on a real stack, as a prologue does it, aligned so that the
 * flags do not depend on where the stack is. */
FORM x_rsp_frame
	push %rbp
	mov %rsp, %rbp
	and $-256, %rsp
at_frame_sub:
	sub $0x88, %rsp
at_frame_jcc:
	jbe 1f
	mov %rdi, 0x80(%rsp)
	mov 0x80(%rsp), %rax
1:	lahf
	seto %al
	mov %rax, %rdx
at_frame_add:
	add $0x88, %rsp
	lahf
	seto %al
	mov %rbp, %rsp
	pop %rbp
	ret
END x_rsp_frame

/* ---- endbr64, nops, xchg --------------------------------------------- */

FORM x_nops
at_endbr64:
	endbr64
at_nop1:
	nop
at_nop2:
	.byte 0x66, 0x90
at_nop3:
	.byte 0x0f, 0x1f, 0x00
at_nop4:
	.byte 0x0f, 0x1f, 0x40, 0x00
at_nop5:
	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00
at_nop6:
	.byte 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00
at_nop7:
	.byte 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00
at_nop8:
	.byte 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
at_nop9:
	.byte 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
at_nop10:
	.byte 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
at_nop11:
	.byte 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00
at_nop_rip:
	.byte 0x0f, 0x1f, 0x05, 0x00, 0x00, 0x00, 0x00	/* nopl 0(%rip) */
at_rex_nop:
	.byte 0x48, 0x90	/* rex.W nop: xchg %rax,%rax */
at_pause:
	pause
	ret
END x_nops

FORM x_xchg
at_xchg_rr:
	xchg %rax, %rbx
at_xchg_r8d:
	.byte 0x41, 0x90	/* xchg %eax,%r8d: 90 with REX.B is no nop */
at_xchg_r9:
	.byte 0x49, 0x91	/* xchg %rax,%r9 */
at_xchg_eax:
	.byte 0x87, 0xc0	/* xchg %eax,%eax: clears the upper half */
	push %rdx
at_xchg_mem:
	xchg %rcx, (%rsp)
	pop %rdx
at_xchg_16:
	xchg %si, %di
	ret
END x_xchg

/* ---- jmp, jcc, loop, jrcxz ------------------------------------------- */

FORM x_jmp
at_jmp8:
	jmp 1f
	mov $1, %eax
1:
at_jmp32:
	{disp32} jmp 2f
	mov $2, %ebx
2:	jmp 4f
3:	add $3, %rcx
	ret
4:
at_jmp8_back:
	jmp 3b
END x_jmp

/* JCC cc: taken or not by the flags run_form loaded (random). */
.macro JCC cc
FORM x_j\cc\()8
at_j\cc\()8:
	j\cc 1f
	mov %rdi, %rax
	ret
1:	mov %rsi, %rax
	ret
END x_j\cc\()8
FORM x_j\cc\()32
at_j\cc\()32:
	{disp32} j\cc 1f
	mov %rdi, %rax
	ret
1:	mov %rsi, %rax
	ret
END x_j\cc\()32
.endm
	JCC o
	JCC no
	JCC b
	JCC ae
	JCC e
	JCC ne
	JCC be
	JCC a
	JCC s
	JCC ns
	JCC p
	JCC np
	JCC l
	JCC ge
	JCC le
	JCC g

/* A backward jcc, taken twice, falling through the third time. */
FORM x_jcc_back
	mov $3, %ecx
	xor %eax, %eax
1:	add %rdi, %rax
	dec %ecx
at3_jnz_back:
	jnz 1b
	ret
END x_jcc_back

FORM x_loop
	mov $3, %ecx
	xor %eax, %eax
1:	add %rsi, %rax
at3_loop:
	loop 1b
	ret
END x_loop

/* loope/loopne: go on while rcx and a bit of rdi say so; r8 counts. */
FORM x_loope
	mov $4, %ecx
	xor %r8d, %r8d
1:	lea 1(%r8), %r8
	shr $1, %rdi
	test $1, %dil
atn_loope:
	loope 1b
	ret
END x_loope

FORM x_loopne
	mov $4, %ecx
	xor %r8d, %r8d
1:	lea 1(%r8), %r8
	shr $1, %rdi
	test $1, %dil
atn_loopne:
	loopne 1b
	ret
END x_loopne

FORM x_jrcxz
	and $1, %ecx
at_jrcxz:
	jrcxz 1f
	mov $7, %eax
	ret
1:	mov $9, %eax
	ret
END x_jrcxz

/* ---- call rel32, ret, ret imm16 -------------------------------------- */

/* ra_check: rax = its return address minus rcx (0 when the caller's call
 * pushed the right one). */
FORM ra_check
	mov (%rsp), %rax
	sub %rcx, %rax
	add %rdi, %rax
	ret
END ra_check

FORM x_call_rel
	lea 1f(%rip), %rcx
at_call_rel:
	call ra_check
1:	mov %rax, %rbx
	call h_leaf
	ret
END x_call_rel

FORM h_leaf
	lea (%rdi,%rsi,2), %rax
at2_ret:
	ret
END h_leaf

FORM h_ret_imm
	mov 8(%rsp), %rax
	sub 16(%rsp), %rax
at_ret_imm:
	ret $16
END h_ret_imm

FORM h_rep_ret
	mov %rsi, %rax
at_rep_ret:
	.byte 0xf3, 0xc3	/* rep ret, as older gcc emitted */
END h_rep_ret

FORM h_bnd_ret
	mov %rdx, %rax
at_bnd_ret:
	.byte 0xf2, 0xc3	/* bnd ret */
END h_bnd_ret

FORM x_rets
	push %rdi
	push %rsi
	call h_ret_imm
	mov %rax, %rbx
	call h_rep_ret
	mov %rax, %rcx
	call h_bnd_ret
	ret
END x_rets

/* ---- indirect calls and jumps ---------------------------------------- */

FORM x_call_reg
	lea ra_check(%rip), %rax
	lea 1f(%rip), %rcx
at_call_reg:
	call *%rax
1:	ret
END x_call_reg

FORM x_call_mem
	lea 1f(%rip), %rcx
at_call_rip:
	call *gfnptr(%rip)
1:	mov %rax, %rbx
	lea ra_check(%rip), %rdx
	push %rdx
	lea 2f(%rip), %rcx
at_call_rsp:
	call *(%rsp)		/* the operand is read before the push */
2:	pop %rdx
	ret
END x_call_mem

FORM x_jmp_reg
	lea 1f(%rip), %rax
at_jmp_reg:
	jmp *%rax
	ud2
1:	lea 2f(%rip), %rdx
at_jmp_notrack:
	notrack jmp *%rdx
	ud2
2:
at_jmp_rip:
	jmp *gjmptab(%rip)
	ud2
END x_jmp_reg

FORM h_jmp_target
	mov $0x77, %eax
	ret
END h_jmp_target

/* ---- rip-relative operands ------------------------------------------- */

FORM x_riprel
at_rip_load:
	mov gdata(%rip), %rax
at_rip_load32:
	mov gdata+8(%rip), %ecx
at_rip_lea:
	lea gdata+16(%rip), %rsi
	sub %rsi, %rsi
at_rip_cmp:
	cmp gdata(%rip), %rdi
	setb %bl
	seto %bh
at_rip_cmp_imm:
	cmpq $5, gdata+16(%rip)	/* disp32, then an imm8 */
	seta %dl
at_rip_test_imm:
	testl $0x10000, gdata+4(%rip)	/* disp32, then an imm32 */
	setz %dh
at_rip_add:
	add gdata+24(%rip), %r8
at_rip_movzx:
	movzbl gdata+3(%rip), %r9d
at_rip_sse:
	movdqu gdata(%rip), %xmm1
	movq %xmm1, %r10
	pextrq $1, %xmm1, %r11
	ret
END x_riprel

/* Run under exact.c's lock: gstore is shared by every thread. */
FORM x_riprel_store
at_rip_store:
	mov %rdi, gstore(%rip)
at_rip_store_imm:
	movl $0x5a5a1234, gstore+8(%rip)	/* disp32, then an imm32 */
at_rip_store_imm8:
	movb $0x7f, gstore+16(%rip)
at_rip_xadd:
	lock xadd %rsi, gstore(%rip)
	mov gstore(%rip), %rax
	mov gstore+8(%rip), %rbx
	mov gstore+16(%rip), %rcx
	ret
END x_riprel_store

/* ---- a copy that faults ---------------------------------------------- */

/* Loads through NULL when bit 0 of rdi is clear: exact.c's SIGSEGV
 * handler checks that the fault is at at_fault and siglongjmps. */
FORM x_fault
	lea gdata(%rip), %rax
	xor %ecx, %ecx
	test $1, %dil
	cmovz %rcx, %rax
	.globl at_fault
at_fault:
	mov 8(%rax), %rdx
	ret
END x_fault

/* ---- flags on the stack ---------------------------------------------- */

FORM x_pushf
at_pushf:
	pushfq
	pop %rax
	and $0x8d5, %rdi
	or $0x202, %rdi
	push %rdi
at_popf:
	popfq
	pushfq
	pop %rdx
at_pushfw:
	pushfw
	popw %cx
	ret
END x_pushf

/* ---- string instructions --------------------------------------------- */

FORM x_string
	sub $0x48, %rsp
	mov %rsp, %rdi
	mov $0x5b5b5b5b5b5b5b5b, %rax
	mov $8, %ecx
at_rep_stosq:
	rep stosq
	mov %rsp, %rdi
	mov %rsi, %rax
	mov %rdx, %rcx
	and $15, %ecx
at_rep_stosb:
	rep stosb
	lea pattern(%rip), %rsi
	mov %rsp, %rdi
	mov %rdx, %rcx
	shr $8, %rcx
	and $31, %ecx
at_rep_movsb:
	rep movsb
at_movsq:
	movsq
	lea pattern(%rip), %rsi
	mov %rsp, %rdi
	mov $16, %ecx
at_repe_cmpsb:
	repe cmpsb
	mov %rcx, %r8
	setz %r9b
	sub %rsp, %rdi
	lea pattern(%rip), %rax
	sub %rax, %rsi
	mov (%rsp), %rax
	mov 8(%rsp), %rbx
	mov 16(%rsp), %rdx
	xor 24(%rsp), %rdx
	xor 32(%rsp), %rdx
	xor 40(%rsp), %rdx
	xor 56(%rsp), %rdx
	add $0x48, %rsp
	test %r8, %r8
	ret
END x_string

/* ---- function entries as gcc -O2 emits them --------------------------- */

FORM x_o2_sub
at_o2_sub:
	sub $0x18, %rsp
	mov %rdi, 8(%rsp)
	lea 8(%rsp), %rax
	mov (%rax), %rax
	add %rsi, %rax
	add $0x18, %rsp
	test %rax, %rax
	ret
END x_o2_sub

FORM x_o2_riprel
at_o2_riprel:
	mov gdata+8(%rip), %rax
	imul %rdi, %rax
	ret
END x_o2_riprel

FORM x_o2_test
at_o2_test:
	test %rdi, %rdi
	js 1f
	lea 1(%rdi), %rax
	ret
1:	mov $-1, %rax
	ret
END x_o2_test

FORM x_o2_endbr
at_o2_endbr:
	endbr64
	push %r15
	push %r14
	mov %rdi, %r15
	push %r13
	push %r12
	push %rbp
	push %rbx
	sub $0x28, %rsp
	mov %rsi, 0x10(%rsp)
	lea (%r15,%rsi), %rax
	add 0x10(%rsp), %rax
	add $0x28, %rsp
	pop %rbx
	pop %rbp
	pop %r12
	pop %r13
	pop %r14
	pop %r15
	test %rax, %rax
	ret
END x_o2_endbr

FORM x_o2_xor
at_o2_xor:
	xor %eax, %eax
	cmp %rsi, %rdi
	setl %al
	ret
END x_o2_xor

FORM x_o2_movrdx
at_o2_movrdx:
	mov %rdx, %rax
	cmp $0x10, %rdi
	cmova %rsi, %rax
	ret
END x_o2_movrdx

FORM x_o2_movzx_mem
	lea gdata(%rip), %rdi
at_o2_movzx_mem:
	movzbl 5(%rdi), %eax
	ret
END x_o2_movzx_mem

FORM x_o2_tail
at_o2_tail:
	jmp h_leaf
END x_o2_tail

FORM x_o2_lea_rsp
at_o2_lea_rsp:
	lea -0x28(%rsp), %rsp
	mov %rdi, (%rsp)
	mov (%rsp), %rax
	lea 0x28(%rsp), %rsp
	ret
END x_o2_lea_rsp

	.section .note.GNU-stack,"",@progbits
