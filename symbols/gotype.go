package symbols

import (
	"debug/dwarf"
	"fmt"
)

// StructFieldOffset returns the byte offset of a field of a struct type
// named in the module's DWARF, e.g. ("runtime.g", "goid") in a Go binary:
// the runtime's layout changes between releases, its DWARF says where.
func (m *Module) StructFieldOffset(typeName, field string) (int64, error) {
	d, err := m.elf.DWARF()
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
