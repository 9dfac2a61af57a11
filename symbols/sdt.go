package symbols

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"sort"
	"sync"
)

// SDTProbe is one statically defined tracing site of a module: a
// <sys/sdt.h> DTRACE_PROBE / STAP_PROBE, described by a note in
// .note.stapsdt, as perf, bpftrace (usdt) and SystemTap read them. The
// site is a nop at PC; Args says where its arguments are there.
type SDTProbe struct {
	Provider, Name string
	PC             uint64 // link address of the site
	// Semaphore is the link address of the probe's is-enabled counter
	// (a uint16 the program tests before it computes the arguments), or
	// 0 where it has none.
	Semaphore uint64
	Args      string // as the note spells them: "8@%rbx -4@-20(%rbp)"
}

// sdtNotes are a module's SDT probes, read once.
type sdtNotes struct {
	once   sync.Once
	probes []SDTProbe
	err    error
}

// SDTProbes returns the module's SDT probes, by provider, name and site.
func (m *Module) SDTProbes() ([]SDTProbe, error) {
	m.sdt.once.Do(func() { m.sdt.probes, m.sdt.err = m.readSDTNotes() })
	return m.sdt.probes, m.sdt.err
}

// ntSTAPSDT is the note type of a SystemTap SDT probe descriptor.
const ntSTAPSDT = 3

// readSDTNotes parses .note.stapsdt: each note (owner "stapsdt", type 3)
// holds three addresses, the site, the link-time address of
// .stapsdt.base, the semaphore, then the provider, name and argument
// strings. A file prelinked (or otherwise moved) after the notes were
// made has .stapsdt.base elsewhere: the site and semaphore move with it.
func (m *Module) readSDTNotes() ([]SDTProbe, error) {
	if m.elf == nil {
		return nil, nil
	}
	sec := m.elf.Section(".note.stapsdt")
	if sec == nil {
		return nil, nil
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: read .note.stapsdt: %w", m.Path, err)
	}
	var baseAddr uint64
	if b := m.elf.Section(".stapsdt.base"); b != nil {
		baseAddr = b.Addr
	}
	word := 8
	if m.elf.Class == elf.ELFCLASS32 {
		word = 4
	}
	out, err := parseSDTNotes(data, baseAddr, m.elf.ByteOrder, word)
	if err != nil {
		err = fmt.Errorf("%s: %w", m.Path, err)
	}
	return out, err
}

// parseSDTNotes parses the notes of .note.stapsdt, data, of a file whose
// .stapsdt.base is at baseAddr (0: none) and whose addresses are word
// bytes; by provider, name and site.
func parseSDTNotes(data []byte, baseAddr uint64, bo binary.ByteOrder, word int) ([]SDTProbe, error) {
	addr := func(b []byte) uint64 {
		if word == 4 {
			return uint64(bo.Uint32(b))
		}
		return bo.Uint64(b)
	}
	align := func(n uint32) int { return int((n + 3) &^ 3) }
	var out []SDTProbe
	var err error
	for len(data) >= 12 {
		namesz, descsz, typ := bo.Uint32(data), bo.Uint32(data[4:]), bo.Uint32(data[8:])
		rest := data[12:]
		if align(namesz)+int(descsz) > len(rest) {
			err = fmt.Errorf(".note.stapsdt: a note runs past the section")
			break
		}
		owner := string(bytes.TrimRight(rest[:namesz], "\x00"))
		desc := rest[align(namesz) : align(namesz)+int(descsz)]
		data = rest[min(align(namesz)+align(descsz), len(rest)):] // (the last may end unpadded)
		if owner != "stapsdt" || typ != ntSTAPSDT || len(desc) < 3*word {
			continue
		}
		p := SDTProbe{PC: addr(desc), Semaphore: addr(desc[2*word:])}
		if base := addr(desc[word:]); baseAddr != 0 && base != 0 {
			p.PC += baseAddr - base
			if p.Semaphore != 0 {
				p.Semaphore += baseAddr - base
			}
		}
		strs := bytes.SplitN(desc[3*word:], []byte{0}, 4)
		if len(strs) < 3 {
			continue
		}
		p.Provider, p.Name, p.Args = string(strs[0]), string(strs[1]), string(strs[2])
		out = append(out, p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Provider != out[j].Provider {
			return out[i].Provider < out[j].Provider
		}
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].PC < out[j].PC
	})
	return out, err
}
