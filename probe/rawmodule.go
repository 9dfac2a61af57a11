package probe

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/probedbg/probe/internal/varint"
	"github.com/probedbg/probe/symbols"
)

// RawModuleFrame is a module's symbol tables (RawModule), for return
// probes' hits: its id, then bit 0 of a flags uvarint (set: more of the
// module's symbols, after a frame of the same id), its name, load bias,
// ranges, functions and objects (docs/recording.md).
const RawModuleFrame = 'M'

// rawModuleMax is about how many bytes of symbols a module's frame holds
// before the rest goes in another (a frame is at most 16 MiB).
const rawModuleMax = 1 << 20

// Module puts m's frames: its tables in frames of about rawModuleMax
// bytes, each continuing the one before.
func (e *RawEncoder) Module(m RawModule) {
	e.Flush()
	head := func(more bool) []byte {
		b := binary.AppendUvarint(nil, uint64(m.ID))
		flags := uint64(0)
		if more {
			flags = 1
		}
		b = binary.AppendUvarint(b, flags)
		b = appendString(b, m.Name)
		b = binary.AppendUvarint(b, m.Bias)
		b = binary.AppendUvarint(b, uint64(len(m.Ranges)))
		for _, r := range m.Ranges {
			b = binary.AppendUvarint(binary.AppendUvarint(b, r[0]), r[1]-r[0])
		}
		return b
	}
	funcs, objects := m.Funcs, m.Objects
	more := false
	for {
		b := head(more)
		var n int
		b, n = appendSymbols(b, funcs)
		funcs = funcs[n:]
		if len(funcs) > 0 {
			b = binary.AppendUvarint(b, 0)
		} else {
			b, n = appendSymbols(b, objects)
			objects = objects[n:]
		}
		e.put(RawModuleFrame, b)
		if len(funcs) == 0 && len(objects) == 0 {
			return
		}
		more = true
	}
}

// appendSymbols appends a count and the first syms (sorted by address)
// that fit a frame: each its address less the one before's, its size and
// its name.
func appendSymbols(b []byte, syms []symbols.Symbol) ([]byte, int) {
	n, size := 0, 0
	for n < len(syms) && size < rawModuleMax {
		size += len(syms[n].Name) + 8
		n++
	}
	b = binary.AppendUvarint(b, uint64(n))
	prev := uint64(0)
	for _, s := range syms[:n] {
		b = binary.AppendUvarint(b, s.Addr-prev)
		b = appendString(binary.AppendUvarint(b, s.Size), s.Name)
		prev = s.Addr
	}
	return b, n
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func readString(d *varint.Reader) string {
	n := d.Uvarint()
	if n > uint64(len(d.B)) {
		d.Bad, d.B = true, nil
		return ""
	}
	s := string(d.B[:n])
	d.B = d.B[n:]
	return s
}

// readModule reads a module's frame.
func readModule(d *varint.Reader) (m RawModule, more bool, err error) {
	m.ID = int(d.Uvarint())
	more = d.Uvarint()&1 != 0
	m.Name = readString(d)
	m.Bias = d.Uvarint()
	n := d.Uvarint()
	if n > uint64(len(d.B)) {
		return m, more, errRawDamaged
	}
	for range n {
		start := d.Uvarint()
		m.Ranges = append(m.Ranges, [2]uint64{start, start + d.Uvarint()})
	}
	if m.Funcs, err = readSymbols(d, true); err != nil {
		return m, more, err
	}
	if m.Objects, err = readSymbols(d, false); err != nil {
		return m, more, err
	}
	if d.Bad || len(d.B) > 0 {
		return m, more, errRawDamaged
	}
	return m, more, nil
}

func readSymbols(d *varint.Reader, funcs bool) ([]symbols.Symbol, error) {
	n := d.Uvarint()
	if n > uint64(len(d.B)) {
		return nil, errRawDamaged
	}
	syms := make([]symbols.Symbol, 0, n)
	addr := uint64(0)
	for range n {
		addr += d.Uvarint()
		size := d.Uvarint()
		syms = append(syms, symbols.Symbol{Name: readString(d), Addr: addr, Size: size, Func: funcs})
	}
	return syms, nil
}

// Module takes a module's tables: the address space return probes' hits
// describe their callers in (returnWhere).
func (d *Decoder) Module(m RawModule, more bool) error {
	sp := d.space
	i := -1
	for j, o := range d.modIDs {
		if o == m.ID {
			i = j
		}
	}
	if more {
		if i < 0 {
			return errors.New("more of a module never given")
		}
		o := sp.Mapped[i]
		m.Funcs, m.Objects = append(o.Functions(), m.Funcs...), append(o.Objects(), m.Objects...)
	}
	if i >= 0 {
		sp.Mapped = append(sp.Mapped[:i], sp.Mapped[i+1:]...)
		d.modIDs = append(d.modIDs[:i], d.modIDs[i+1:]...)
	}
	if len(m.Ranges) == 0 {
		return nil // gone
	}
	for _, r := range m.Ranges {
		if r[1] < r[0] {
			return fmt.Errorf("module %s: a range that ends before it starts", m.Name)
		}
	}
	sp.Mapped = append(sp.Mapped, symbols.TableMapped(m.Name, m.Bias, m.Ranges, m.Funcs, m.Objects))
	d.modIDs = append(d.modIDs, m.ID)
	return nil
}
