package tracee

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
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
		if rng, _, ok := strings.Cut(line, " "); ok && strings.Contains(rng, "-") && !strings.HasSuffix(rng, ":") {
			lo, hi, _ := strings.Cut(rng, "-")
			start, err1 := strconv.ParseUint(lo, 16, 64)
			end, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 == nil && err2 == nil {
				in = start <= addr && addr < end
				continue
			}
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
