package symbols

import (
	"encoding/binary"
	"testing"
)

// TestReadSDTNotes: a section of notes, the last unpadded, one of
// another owner between: each stapsdt note's site, semaphore and strings,
// moved as .stapsdt.base moved (prelink).
func TestReadSDTNotes(t *testing.T) {
	note := func(owner string, typ uint32, desc []byte) []byte {
		name := append([]byte(owner), 0)
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(name)))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(desc)))
		b = binary.LittleEndian.AppendUint32(b, typ)
		b = append(b, name...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return append(b, desc...)
	}
	desc := func(pc, base, sem uint64, strs string) []byte {
		b := binary.LittleEndian.AppendUint64(nil, pc)
		b = binary.LittleEndian.AppendUint64(b, base)
		b = binary.LittleEndian.AppendUint64(b, sem)
		return append(b, strs...)
	}
	pad := func(b []byte) []byte {
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
		return b
	}
	var sec []byte
	sec = append(sec, pad(note("stapsdt", 3, desc(0x1000, 0x2000, 0x3000, "demo\x00tick\x00-8@%rdi -4@%eax\x00")))...)
	sec = append(sec, pad(note("GNU", 3, []byte{1, 2, 3, 4}))...)
	sec = append(sec, note("stapsdt", 3, desc(0x1100, 0x2000, 0, "demo\x00done\x00\x00"))...) // unpadded
	probes, err := parseSDTNotes(sec, 0x2010, binary.LittleEndian, 8)
	if err != nil {
		t.Fatal(err)
	}
	want := []SDTProbe{
		{Provider: "demo", Name: "done", PC: 0x1110, Args: ""},
		{Provider: "demo", Name: "tick", PC: 0x1010, Semaphore: 0x3010, Args: "-8@%rdi -4@%eax"},
	}
	if len(probes) != len(want) {
		t.Fatalf("%+v, want %+v", probes, want)
	}
	for i := range want {
		if probes[i] != want[i] {
			t.Errorf("probe %d: %+v, want %+v", i, probes[i], want[i])
		}
	}
}
