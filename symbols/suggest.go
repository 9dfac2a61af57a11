package symbols

import (
	"sort"
	"strings"
)

// ranker collects names similar to a query, for "did you mean" messages.
type ranker struct {
	found map[string]int // name -> score, lower is better
	row   []int          // scratch for editDistance
}

// add scores each candidate against query and keeps the plausible ones;
// penalty is added to every score (names from libraries rank below the
// program's own).
func (r *ranker) add(query string, candidates []string, penalty int) {
	if r.found == nil {
		r.found = make(map[string]int)
	}
	q := strings.ToLower(query)
	for _, c := range candidates {
		score, ok := r.score(q, c)
		if !ok {
			continue
		}
		score += penalty
		if old, seen := r.found[c]; !seen || score < old {
			r.found[c] = score
		}
	}
}

// score rates candidate c against the lower-cased query q: a small edit
// distance, containing the query ("work" in "main.work"), or spelling it
// with letters left out ("wrk" in "worker") all qualify.
func (r *ranker) score(q, c string) (int, bool) {
	lc := strings.ToLower(c)
	if lc == q {
		return 0, true
	}
	if len(q) >= 3 && strings.Contains(lc, q) {
		return 1 + (len(lc)-len(q))/8, true
	}
	limit := max(2, len(q)/3)
	diff := len(lc) - len(q)
	subseq := len(lc) <= 2*len(q)+2 && isSubsequence(q, lc)
	if !subseq && (diff > limit || -diff > limit) {
		return 0, false // the distance is at least the length difference
	}
	d := r.editDistance(q, lc)
	if d <= limit || subseq {
		return d, true
	}
	return 0, false
}

// top returns up to n names, best score first, then shorter, then by name.
func (r *ranker) top(n int) []string {
	names := make([]string, 0, len(r.found))
	for name := range r.found {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := names[i], names[j]
		if r.found[a] != r.found[b] {
			return r.found[a] < r.found[b]
		}
		if len(a) != len(b) {
			return len(a) < len(b)
		}
		return a < b
	})
	if n < 0 {
		n = 0
	}
	if len(names) > n {
		names = names[:n]
	}
	return names
}

func isSubsequence(q, s string) bool {
	i := 0
	for j := 0; j < len(s) && i < len(q); j++ {
		if s[j] == q[i] {
			i++
		}
	}
	return i == len(q)
}

// editDistance is the Levenshtein distance over bytes, with one reused row.
func (r *ranker) editDistance(a, b string) int {
	if cap(r.row) < len(b)+1 {
		r.row = make([]int, len(b)+1)
	}
	row := r.row[:len(b)+1]
	for j := range row {
		row[j] = j
	}
	for i := 1; i <= len(a); i++ {
		diag := row[0]
		row[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			next := min(row[j]+1, row[j-1]+1, diag+cost)
			diag = row[j]
			row[j] = next
		}
	}
	return row[len(b)]
}
