package probe

import (
	"slices"
	"testing"

	"github.com/probedbg/probe/fetch"
)

// A fork child's sites are copies of its parent's, its probes the same
// Probes: a probe added or removed afterwards on one side must not show
// on the other (the REPL adds and removes in each process of a family).
func TestForkCopiedSites(t *testing.T) {
	shared, mine, theirs := &Probe{Group: "g", Event: "shared"}, &Probe{Group: "g", Event: "mine"}, &Probe{Group: "g", Event: "theirs"}
	st := &site{addr: 0x1000, probes: make([]*Probe, 1, 8), sdtArgs: map[*Probe]*fetch.Args{}}
	st.probes[0] = shared
	shared.sites = []*site{st}
	parent := &Tracer{sites: map[uint64]*site{st.addr: st}}
	child := &Tracer{sites: map[uint64]*site{st.addr: st.forkCopy()}}
	cst := child.sites[st.addr]

	// Both append into what was one array, with room for both.
	st.probes = append(st.probes, theirs)
	cst.probes = append(cst.probes, mine)
	if !slices.Equal(st.probes, []*Probe{shared, theirs}) || !slices.Equal(cst.probes, []*Probe{shared, mine}) {
		t.Fatalf("parent's site has %v, child's %v: one wrote over the other", names(st.probes), names(cst.probes))
	}
	cst.sdtArgs[mine] = nil
	if _, ok := st.sdtArgs[mine]; ok {
		t.Fatal("the child's sdtArgs are its parent's map")
	}

	// The shared probe's sites in each process: the parent's its own,
	// the child's its copies, before and after the parent's removal.
	if sites, own := parent.sitesOf(shared); !own || !slices.Equal(sites, []*site{st}) {
		t.Errorf("parent: sites %p own %v, want its own %p", sites, own, st)
	}
	if sites, own := child.sitesOf(shared); own || !slices.Equal(sites, []*site{cst}) {
		t.Errorf("child: sites %p own %v, want its copy %p, not p.sites", sites, own, cst)
	}
	if err := parent.detachSites(shared); err != nil {
		t.Fatal(err)
	}
	if sites, _ := child.sitesOf(shared); !slices.Equal(sites, []*site{cst}) {
		t.Errorf("child after the parent's removal: sites %p, want its copy %p", sites, cst)
	}
}

func names(ps []*Probe) []string {
	var ns []string
	for _, p := range ps {
		ns = append(ns, p.Event)
	}
	return ns
}
