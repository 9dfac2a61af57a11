package symbols

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// mapping is one line of /proc/PID/maps.
type mapping struct {
	start, end uint64
	perms      string
	offset     uint64
	dev        string // "major:minor" in hex, as printed
	inode      uint64
	path       string // may end in " (deleted)"; "" for anonymous memory
}

// readMaps reads and parses procDir/maps.
func readMaps(procDir string) ([]mapping, error) {
	f, err := os.Open(procDir + "/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	maps, err := parseMaps(f)
	if err != nil {
		return nil, fmt.Errorf("read %s/maps: %w", procDir, err)
	}
	return maps, nil
}

func parseMaps(r io.Reader) ([]mapping, error) {
	var out []mapping
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		m, err := parseMapsLine(line)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// parseMapsLine parses "start-end perms offset dev inode   path"; the path
// is the rest of the line and may contain spaces.
func parseMapsLine(line string) (mapping, error) {
	var m mapping
	bad := func(what string) (mapping, error) {
		return mapping{}, fmt.Errorf("malformed maps line (%s): %q", what, line)
	}
	var field [5]string
	rest := line
	for i := range field {
		rest = strings.TrimLeft(rest, " ")
		var ok bool
		field[i], rest, ok = strings.Cut(rest, " ")
		if !ok && i < len(field)-1 {
			return bad("too few fields")
		}
	}
	startHex, endHex, ok := strings.Cut(field[0], "-")
	if !ok {
		return bad("range")
	}
	var err error
	if m.start, err = strconv.ParseUint(startHex, 16, 64); err != nil {
		return bad("start")
	}
	if m.end, err = strconv.ParseUint(endHex, 16, 64); err != nil {
		return bad("end")
	}
	m.perms = field[1]
	if m.offset, err = strconv.ParseUint(field[2], 16, 64); err != nil {
		return bad("offset")
	}
	m.dev = field[3]
	if m.inode, err = strconv.ParseUint(field[4], 10, 64); err != nil {
		return bad("inode")
	}
	m.path = strings.TrimLeft(rest, " ")
	return m, nil
}
