package symbols

import (
	"fmt"
	"strconv"
	"strings"
)

// Reload re-reads /proc/PID/maps after the process has loaded or unloaded
// libraries. It returns a new Space that shares the Mapped of every file
// still placed where it was, the files newly mapped (added) and those no
// longer mapped (removed, not closed: the caller closes them once nothing
// refers to them). s itself is left as it was.
func (s *Space) Reload() (next *Space, added, removed []*Mapped, err error) {
	if s.Pid <= 0 {
		return s, nil, nil, nil
	}
	procDir := "/proc/" + strconv.Itoa(s.Pid)
	maps, err := readMaps(procDir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reload process %d: %w", s.Pid, err)
	}
	kept := make(map[*Mapped]bool)
	next = &Space{Pid: s.Pid}
	if main := s.Main(); main != nil {
		// The executable stays first; an exec makes a new Tracer space.
		next.Mapped = append(next.Mapped, main)
		kept[main] = true
	}
	for _, mf := range groupByFile(maps) {
		path, _ := strings.CutSuffix(mf.path, deletedSuffix)
		var same []*Mapped
		for _, m := range s.Mapped {
			if m.filePath == path && m.Start >= mf.maps[0].start && m.End <= mf.maps[len(mf.maps)-1].end {
				same = append(same, m)
			}
		}
		if len(same) > 0 {
			for _, m := range same {
				if !kept[m] {
					kept[m] = true
					next.Mapped = append(next.Mapped, m)
				}
			}
			continue
		}
		opened, err := openMapped(procDir, mf, false)
		if err != nil {
			continue // not ELF, or gone already: as LoadProcess
		}
		next.Mapped = append(next.Mapped, opened...)
		added = append(added, opened...)
	}
	for _, m := range s.Mapped {
		if !kept[m] {
			removed = append(removed, m)
		}
	}
	return next, added, removed, nil
}

// Without returns a Space without the modules overlapping [start, end),
// and those modules: for a range about to be unmapped.
func (s *Space) Without(start, end uint64) (next *Space, gone []*Mapped) {
	next = &Space{Pid: s.Pid}
	for i, m := range s.Mapped {
		if i > 0 && m.Overlaps(start, end) {
			gone = append(gone, m)
			continue
		}
		next.Mapped = append(next.Mapped, m)
	}
	return next, gone
}

// Overlaps reports whether any of m's mappings meets [start, end).
func (m *Mapped) Overlaps(start, end uint64) bool {
	for _, r := range m.ranges {
		if r.start < end && start < r.end {
			return true
		}
	}
	return false
}

// FilePath is the path of the mapped file as /proc/PID/maps names it.
func (m *Mapped) FilePath() string { return m.filePath }
