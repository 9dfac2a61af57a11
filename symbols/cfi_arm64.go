package symbols

// DWARF register numbers of arm64 (DWARF for the Arm 64-bit
// Architecture): x29 the frame pointer, sp, x30 the link register.
const (
	dwarfFP = 29
	dwarfSP = 31
	dwarfLR = 30
)

// linkRegister: a call leaves the return address in x30.
const linkRegister = true

// entryRule is the CFI of a called function's first instruction: the
// CFA is sp, the return address in x30.
var entryRule = CallerRule{RetInLR: true}
