package symbols

// DWARF register numbers of x86-64 (System V psABI, figure 3.36).
const (
	dwarfFP = 6  // rbp
	dwarfSP = 7  // rsp
	dwarfLR = 16 // the return address column (rip): no link register
)

// linkRegister: a call leaves the return address on the stack.
const linkRegister = false

// entryRule is the CFI of a called function's first instruction: the
// CFA is rsp+8, the return address just below it.
var entryRule = CallerRule{CFAOffset: 8, RetOffset: -8}
