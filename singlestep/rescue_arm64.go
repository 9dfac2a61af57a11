package singlestep

// Code: not on arm64 yet (the tracer then attaches without a rescue).
func (r *RescueCode) Code(at uint64) (code []byte, restorer uint64, err error) {
	return nil, 0, errNoCodegen
}
