package probe

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/probedbg/probe/fetch"
)

// The library API on a real tracee: Launch, Add with pre- and
// post-handlers, Add and Remove from other goroutines while hits stream in
// (the doorbell path), a panicking handler, Detach.

const tracedC = `
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
volatile long g;
__attribute__((noinline)) long work(long i) { g += i; return g; }
__attribute__((noinline)) long other(long i) { return i + 1; }
int main(int argc, char **argv) {
	long n = atol(argv[1]), s = 0;
	int pause_us = argc > 2 ? atoi(argv[2]) : 0;
	for (long i = 0; i < n; i++) {
		s += work(i) + other(i);
		if (pause_us) usleep(pause_us);
	}
	printf("s=%ld\n", s);
	return 0;
}
`

func buildTraced(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "traced.c")
	if err := os.WriteFile(src, []byte(tracedC), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "traced")
	// -O0: work starts with push %rbp, which is emulated.
	if out, err := exec.Command("gcc", "-O0", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return bin
}

// launch starts argv under a Tracer; the returned function gives the
// tracee's stdout once it has closed it.
func launch(t *testing.T, argv ...string) (*Tracer, func() string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	tr, err := Launch(argv, &LaunchOptions{Stdout: w})
	w.Close()
	if err != nil {
		r.Close()
		t.Fatal(err)
	}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() { out.ReadFrom(r); r.Close(); close(done) }()
	t.Cleanup(func() { tr.Detach(); <-done })
	return tr, func() string { <-done; return out.String() }
}

func untraced(t *testing.T, argv ...string) string {
	t.Helper()
	out, err := exec.Command(argv[0], argv[1:]...).Output()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestPrePostHandlers(t *testing.T) {
	bin := buildTraced(t)
	tr, _ := launch(t, bin, "100")
	var pre, post atomic.Int64
	var badPost, badPre atomic.Value
	_, err := tr.Add("p:work", Handler{
		Pre: func(h *Hit) {
			pre.Add(1)
			// The registers by their names, as fetch-args name them;
			// the pc is the probe's address.
			ip, okIP := h.Reg("ip")
			sp, okSP := h.Reg("rsp")
			di, _ := h.Reg("rdi")
			edi, _ := h.Reg("edi")
			_, okBad := h.Reg("nosuch")
			if !okIP || !okSP || okBad || ip != h.PC() || sp != h.SP() || edi != di&0xffffffff || h.SP() == 0 || h.PC() != h.Probe.Addr {
				badPre.Store(fmt.Sprintf("probe at %#x: ip %#x (%v) pc %#x, rsp %#x (%v) sp %#x, rdi %#x edi %#x, nosuch %v", h.Probe.Addr, ip, okIP, h.PC(), sp, okSP, h.SP(), di, edi, okBad))
			}
		},
		Post: func(h *Hit) {
			post.Add(1)
			// After the emulated push %rbp, rip is on the next
			// instruction, one byte on.
			if h.PC() != h.Probe.Addr+1 {
				badPost.Store(h.PC())
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tr.Start()
	status, err := tr.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !status.Exited || status.Code != 0 {
		t.Fatalf("status %+v", status)
	}
	if pre.Load() != 100 || post.Load() != 100 {
		t.Errorf("pre %d post %d, want 100 each", pre.Load(), post.Load())
	}
	if v := badPost.Load(); v != nil {
		t.Errorf("post-handler saw rip %#x", v)
	}
	if v := badPre.Load(); v != nil {
		t.Errorf("pre-handler's registers: %s", v)
	}
}

// TestAddRemoveWhileRunning adds and removes probes from several
// goroutines while the tracee runs and hits: every call must complete and
// the tracee must finish with its own output.
func TestAddRemoveWhileRunning(t *testing.T) {
	bin := buildTraced(t)
	tr, out := launch(t, bin, "400", "500")
	var workHits atomic.Int64
	if _, err := tr.Add("p:work", Handler{Pre: func(*Hit) { workHits.Add(1) }}); err != nil {
		t.Fatal(err)
	}
	tr.Start()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				p, err := tr.Add("p:other", Handler{})
				if err != nil {
					if strings.Contains(err.Error(), "already exists") {
						continue // another goroutine holds it right now
					}
					errs <- err
					return
				}
				time.Sleep(2 * time.Millisecond)
				if err := tr.Remove(p); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(tr.Probes()); got != 1 {
		t.Errorf("%d probes left, want 1", got)
	}
	status, err := tr.Wait()
	if err != nil || !status.Exited || status.Code != 0 {
		t.Fatalf("status %+v, %v", status, err)
	}
	if workHits.Load() != 400 {
		t.Errorf("work hits %d, want 400", workHits.Load())
	}
	if got, want := out(), untraced(t, bin, "400"); got != want {
		t.Errorf("tracee printed %q, want %q", got, want)
	}
}

// TestHandlerPanic: our bug must end in a clean detach, the tracee
// running on to its normal end.
func TestHandlerPanic(t *testing.T) {
	bin := buildTraced(t)
	tr, _ := launch(t, bin, "50")
	var n atomic.Int64
	if _, err := tr.Add("p:work", Handler{Pre: func(*Hit) {
		if n.Add(1) == 10 {
			panic("handler bug")
		}
	}}); err != nil {
		t.Fatal(err)
	}
	tr.Start()
	_, err := tr.Wait()
	if err == nil || !strings.Contains(err.Error(), "handler bug") {
		t.Fatalf("Wait error %v, want the panic", err)
	}
	if n.Load() != 10 {
		t.Errorf("%d hits after the panic's detach, want 10", n.Load())
	}
	if _, err := tr.Add("p:other", Handler{}); !errors.Is(err, ErrDetached) {
		t.Errorf("Add after detach: %v, want ErrDetached", err)
	}
}

func TestAddBadInput(t *testing.T) {
	bin := buildTraced(t)
	tr, _ := launch(t, bin, "1")
	for _, spec := range []string{"p:nosuch", "p:work+2", "p:g", "q:work", "p:libnope:x"} {
		if _, err := tr.Add(spec, Handler{}); !errors.Is(err, fetch.ErrBadInput) {
			t.Errorf("Add(%q) = %v, want ErrBadInput", spec, err)
		}
	}
}
