package symbols

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"fmt"
)

// StructFieldOffset returns the byte offset of a field of a struct type
// named in the module's DWARF, e.g. ("runtime.g", "goid") in a Go binary:
// the runtime's layout changes between releases, its DWARF says where.
func (m *Module) StructFieldOffset(typeName, field string) (int64, error) {
	d, err := dwarfEntries(m.elf)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", m.Path, err)
	}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			return 0, fmt.Errorf("%s: no struct %s with a field %s", m.Path, typeName, field)
		}
		if e.Tag != dwarf.TagStructType || e.Val(dwarf.AttrName) != typeName {
			if e.Tag != dwarf.TagCompileUnit && e.Children {
				r.SkipChildren()
			}
			continue
		}
		for e.Children {
			c, err := r.Next()
			if err != nil || c == nil || c.Tag == 0 {
				break
			}
			if c.Tag == dwarf.TagMember && c.Val(dwarf.AttrName) == field {
				if off, ok := c.Val(dwarf.AttrDataMemberLoc).(int64); ok {
					return off, nil
				}
			}
			if c.Children {
				r.SkipChildren()
			}
		}
	}
}

// dwarfEntries reads the DWARF sections needed to walk DIEs and their
// attributes, and not the line, range and location tables that
// elf.File.DWARF decompresses too: in a big Go binary those double the
// cost of finding one type.
func dwarfEntries(f *elf.File) (*dwarf.Data, error) {
	sect := func(name string) ([]byte, error) {
		s := f.Section(".debug_" + name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			return nil, nil
		}
		return s.Data()
	}
	abbrev, err := sect("abbrev")
	if err != nil {
		return nil, err
	}
	info, err := sect("info")
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, errors.New("no DWARF .debug_info")
	}
	str, err := sect("str")
	if err != nil {
		return nil, err
	}
	d, err := dwarf.New(abbrev, nil, nil, info, nil, nil, nil, str)
	if err != nil {
		return nil, err
	}
	// DWARF 5 attribute forms index these.
	for _, name := range []string{"addr", "str_offsets", "line_str"} {
		b, err := sect(name)
		if err != nil {
			return nil, err
		}
		if b != nil {
			if err := d.AddSection(".debug_"+name, b); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}
