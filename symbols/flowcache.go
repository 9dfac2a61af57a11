package symbols

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"

	"github.com/probedbg/probe/singlestep"
)

// Where each function the function tracer hooks jumps (its branches, its
// jump tables read: singlestep.AnalyzeFunction) is the same at every
// start, and working it out was a tenth of a start's CPU on Lua (~700
// functions). The flows found are kept in a cache file beside the
// branches', named by a checksum of every byte the file loads, at its
// address: the code and the tables it reads. A function of another size
// than the one cached is analysed anew, as is one that does not decode.
//
// The file: the line "probe-flows 2" (2: computed gotos' tables read), the count of functions, each (by
// address) as its distance from the one before, its size, its branches
// (their count; each source's distance from the function's start and
// its target's signed distance from its source) and its unknown indirect
// jumps (their count; each one's distance from the start), all varints,
// and last the CRC-32C of all that.

const flowCacheMagic = "probe-flows 2\n"

// flowSet is a module's functions' flows, at link addresses.
type flowSet struct {
	once  sync.Once
	key   string // the cache file's name, "" if the file cannot be read
	mu    sync.Mutex
	flows map[uint64]cachedFlow // by function address
	added bool                  // flows found since the cache was read
}

type cachedFlow struct {
	size uint64
	flow *singlestep.FunctionFlow
}

// flowKey names the cache file of the module's flows: a checksum of the
// bytes of its loadable segments and where they load.
func (m *Module) flowKey() (string, error) {
	if m.file == nil {
		return "", fmt.Errorf("%s: closed", m.Path)
	}
	h, n := uint32(0), uint64(0)
	var word [16]byte
	buf := make([]byte, 256<<10)
	for _, p := range m.loads {
		binary.LittleEndian.PutUint64(word[:], p.Vaddr)
		binary.LittleEndian.PutUint64(word[8:], p.Filesz)
		h = crc32.Update(h, castagnoli, word[:])
		for off := uint64(0); off < p.Filesz; {
			k := min(uint64(len(buf)), p.Filesz-off)
			if _, err := m.file.ReadAt(buf[:k], int64(p.Off+off)); err != nil {
				return "", err
			}
			h = crc32.Update(h, castagnoli, buf[:k])
			off += k
		}
		n += p.Filesz
	}
	return fmt.Sprintf("flows-%08x-%x-%x", h, n, len(m.loads)), nil
}

// cachedFlows reads the module's cache of flows, once.
func (m *Module) cachedFlows() *flowSet {
	s := &m.flows
	s.once.Do(func() {
		s.flows = map[uint64]cachedFlow{}
		if BranchCacheDir == "" {
			return // (none kept)
		}
		key, err := m.flowKey()
		if err != nil {
			return
		}
		s.key = key
		if b, err := readCacheFile(key); err == nil {
			if flows, err := decodeFlowCache(b); err == nil {
				s.flows = flows
			}
		}
	})
	return s
}

// KeepFunctionFlows writes the module's flows to its cache file if
// FunctionFlow found any the file did not have.
func (m *Module) KeepFunctionFlows() {
	s := &m.flows // (not read if FunctionFlow was never asked)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.added || s.key == "" {
		return
	}
	writeCacheFile(s.key, encodeFlowCache(s.flows))
	s.added = false
}

func encodeFlowCache(flows map[uint64]cachedFlow) []byte {
	b := append([]byte(nil), flowCacheMagic...)
	addrs := slices.Sorted(func(yield func(uint64) bool) {
		for a := range flows {
			if !yield(a) {
				return
			}
		}
	})
	b = binary.AppendUvarint(b, uint64(len(addrs)))
	prev := uint64(0)
	for _, a := range addrs {
		f := flows[a]
		b = binary.AppendUvarint(b, a-prev)
		b = binary.AppendUvarint(b, f.size)
		b = binary.AppendUvarint(b, uint64(len(f.flow.Branches)))
		for _, br := range f.flow.Branches {
			b = binary.AppendUvarint(b, br.From-a)
			b = binary.AppendVarint(b, int64(br.To-br.From))
		}
		b = binary.AppendUvarint(b, uint64(len(f.flow.Unknown)))
		for _, at := range f.flow.Unknown {
			b = binary.AppendUvarint(b, at-a)
		}
		prev = a
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeFlowCache(b []byte) (map[uint64]cachedFlow, error) {
	r, n, err := openCacheFile(b, flowCacheMagic)
	if err != nil {
		return nil, err
	}
	flows := make(map[uint64]cachedFlow, n)
	addr := uint64(0)
	for range n {
		addr += r.Uvarint()
		size := r.Uvarint()
		flow := &singlestep.FunctionFlow{}
		nb := r.Uvarint()
		if nb > uint64(len(r.B)) {
			return nil, errBadBranchCache
		}
		if nb > 0 {
			flow.Branches = make([]singlestep.Branch, nb)
		}
		for i := range flow.Branches {
			from := addr + r.Uvarint()
			flow.Branches[i] = singlestep.Branch{From: from, To: from + uint64(r.Varint())}
		}
		nu := r.Uvarint()
		if nu > uint64(len(r.B)) {
			return nil, errBadBranchCache
		}
		for range nu {
			flow.Unknown = append(flow.Unknown, addr+r.Uvarint())
		}
		if r.Bad {
			return nil, errBadBranchCache
		}
		flows[addr] = cachedFlow{size: size, flow: flow}
	}
	if r.Bad || len(r.B) != 0 {
		return nil, errBadBranchCache
	}
	return flows, nil
}
