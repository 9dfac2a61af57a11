package symbols

import "github.com/probedbg/probe/singlestep"

// FunctionFlow returns where the function at link address addr, of size
// bytes, jumps (singlestep.AnalyzeFunction, its tables read from the
// module's read-only segments), at link addresses: from the module's cache, else worked out
// and kept for KeepFunctionFlows. Safe for concurrent use.
func (m *Module) FunctionFlow(addr, size uint64) (*singlestep.FunctionFlow, error) {
	s := m.cachedFlows()
	s.mu.Lock()
	c, ok := s.flows[addr]
	s.mu.Unlock()
	if ok && c.size == size {
		return c.flow, nil
	}
	fn, err := m.ReadCode(addr, size)
	if err != nil {
		return nil, err
	}
	flow, err := singlestep.AnalyzeFunction(fn, addr, m.ReadTable)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.flows[addr], s.added = cachedFlow{size: size, flow: flow}, true
	s.mu.Unlock()
	return flow, nil
}
