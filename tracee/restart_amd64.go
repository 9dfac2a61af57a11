package tracee

// settleRestart does nothing on x86-64: the kernel decides about a
// restart from the registers it finds when the thread resumes (rax an
// -ERESTART* code, orig_rax the call), so registers put back restart the
// call as it would have.
func (p *Process) settleRestart(tid int) error { return nil }
