package tracee

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// BTIGuarded reports whether the page at addr is guarded by branch
// target identification (arm64's VmFlags "bt" in /proc/PID/smaps: the
// kernel or the dynamic linker mapped it with PROT_BTI): an indirect
// branch may land only on a landing pad there.
func (p *Process) BTIGuarded(addr uint64) (bool, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/smaps", p.Pid))
	if err != nil {
		return false, err
	}
	defer f.Close()
	return btiGuarded(f, addr)
}

// btiGuarded reads smaps text: the VmFlags of the mapping that holds
// addr.
func btiGuarded(r io.Reader, addr uint64) (bool, error) {
	sc := bufio.NewScanner(r)
	in := false
	for sc.Scan() {
		line := sc.Text()
		rng, _, _ := strings.Cut(line, " ")
		if start, end, ok := parseRange(rng); ok { // a mapping's first line
			in = start <= addr && addr < end
			continue
		}
		if flags, ok := strings.CutPrefix(line, "VmFlags:"); ok && in {
			for _, fl := range strings.Fields(flags) {
				if fl == "bt" {
					return true, nil
				}
			}
			return false, nil
		}
	}
	if err := sc.Err(); err != nil {
		return false, err
	}
	return false, fmt.Errorf("%#x: in no mapping", addr)
}
