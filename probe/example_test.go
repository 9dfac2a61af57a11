package probe_test

// The examples of docs/library.md and of the package's doc, compiled
// (TestDocsExamples checks that the docs show these lines): not run, as
// each needs a process to trace.

import (
	"fmt"
	"log"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/probedbg/probe/fetch"
	"github.com/probedbg/probe/probe"
)

func ExampleAttach() {
	pid := os.Getpid()          // the process to trace
	t, err := probe.Attach(pid) // or probe.Launch(argv, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer t.Detach()
	p, err := t.Add("p:malloc size=%di:u64", probe.Handler{
		Pre:  func(h *probe.Hit) { fmt.Println(h.Tid, h.Fields) /* h.Reg("di"), h.Mem ... */ },
		Post: func(h *probe.Hit) { /* after the probed instruction */ },
	})
	if err != nil {
		log.Fatal(err)
	}
	t.Start()
	time.Sleep(time.Second)
	fmt.Println(p.Name(), p.Hits())
}

func ExampleTracer_TraceFunctions() {
	t, err := probe.Attach(os.Getpid())
	if err != nil {
		log.Fatal(err)
	}
	defer t.Detach()
	info, err := t.TraceFunctions(probe.FuncTraceOptions{
		Filter: []string{"http_*"}, Returns: true, MaxDepth: 4,
		Handler: func(ev *probe.FuncEvent) { fmt.Println(ev.Kind, ev.Func, ev.Depth, ev.Lane) },
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Functions, "functions traced")
	t.Start()
}

func ExampleTracer_Processes() {
	t, err := probe.Attach(os.Getpid())
	if err != nil {
		log.Fatal(err)
	}
	defer t.Detach()
	t.SetFollow(true) // its children too
	t.Start()
	time.Sleep(time.Second)
	for _, pt := range t.Processes() { // t's process, and those followed now
		p, err := pt.Add("p:work", probe.Handler{Pre: func(h *probe.Hit) { fmt.Println(h.Pid) }})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(pt.Pid(), p.Name())
	}
}

func ExampleTracer_AddSpec() {
	t, err := probe.Attach(os.Getpid())
	if err != nil {
		log.Fatal(err)
	}
	defer t.Detach()
	s, err := fetch.ParseSpec(`o:libc:malloc $retval=0 errno=ENOMEM if size > 1048576`)
	if err != nil {
		log.Fatal(err)
	}
	s.Override.Fail = fetch.FailAttr{Interval: 1, Probability: 10, Times: 5, Seed: 7}
	p, err := t.AddSpec(s, probe.Handler{Pre: func(h *probe.Hit) { /* a failed call */ }})
	if err != nil {
		log.Fatal(err)
	}
	t.Start()
	fmt.Println(p.Name())
}

func ExampleTracer_Patch() {
	pid := os.Getpid()
	t, err := probe.Attach(pid)
	if err != nil {
		log.Fatal(err)
	}
	defer t.Detach()
	t.Start()
	patch, err := t.Patch("compute", "./libpatch.so", "compute_v2", probe.PatchOptions{Wait: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(patch)
	_, err = t.Unpatch("compute", 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	patches, err := probe.ListPatches(pid) // no tracer needed
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(patches)
}

// TestDocsExamples: every line of code docs/library.md and the package's
// doc show is a line of the examples above, which compile: the docs
// cannot show a call that does not.
func TestDocsExamples(t *testing.T) {
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	examples := strings.Split(string(src), "\n")
	lib, err := os.ReadFile("../docs/library.md")
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile("probe.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(string(lib), -1)
	var docLines []string
	for _, b := range blocks {
		docLines = append(docLines, strings.Split(b[1], "\n")...)
	}
	for _, l := range strings.Split(string(pkg), "\n") {
		if code, ok := strings.CutPrefix(l, "//\t"); ok {
			docLines = append(docLines, code)
		}
	}
	if len(blocks) < 3 || len(docLines) < 40 {
		t.Fatalf("found %d go blocks in docs/library.md, %d lines with the package doc's", len(blocks), len(docLines))
	}
	for _, l := range docLines {
		want := codeLine(l)
		if want == "" {
			continue
		}
		if !slices.ContainsFunc(examples, func(e string) bool { return codeLine(e) == want }) {
			t.Errorf("the docs show %q, which no example has", strings.TrimSpace(l))
		}
	}
}

// codeLine is a line of Go without its // comment and its spacing.
func codeLine(l string) string {
	if i := strings.Index(l, " //"); i >= 0 {
		l = l[:i]
	}
	return strings.Join(strings.Fields(l), " ")
}
