package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/probedbg/probe/probe"
)

// probe patch PID FUNC --with LIB:NEWFUNC, probe unpatch PID FUNC, probe
// list --patches PID: live patching (probe/patch.go).

const defaultPatchWait = 5 * time.Second

// patchArgs parses PID FUNC and the flags of patch and unpatch (with and
// inlined: patch's own, nil for unpatch).
func patchArgs(args []string, usage string, with *string, inlined *bool) (pid int, fn string, wait time.Duration, err error) {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	wait = defaultPatchWait
	fs.Var((*durationFlag)(&wait), "wait", "")
	if with != nil {
		fs.StringVar(with, "with", "", "")
		fs.BoolVar(inlined, "inlined", false, "")
	}
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return 0, "", 0, flagError(err)
	}
	if len(pos) != 2 || with != nil && *with == "" {
		return 0, "", 0, fmt.Errorf("usage: %s", usage)
	}
	if pid, err = strconv.Atoi(pos[0]); err != nil || pid <= 0 {
		return 0, "", 0, fmt.Errorf("bad PID %q", pos[0])
	}
	return pid, pos[1], wait, nil
}

func cmdPatch(args []string) (int, error) {
	var with string
	var inlined bool
	pid, fn, wait, err := patchArgs(args, "probe patch PID FUNC --with LIB:NEWFUNC [--wait D] [--inlined]", &with, &inlined)
	if err != nil {
		return bad("%v", err)
	}
	i := strings.LastIndexByte(with, ':')
	if i <= 0 || i == len(with)-1 {
		return bad("--with %q: want LIB:NEWFUNC (a shared library's path and its function)", with)
	}
	lib, newFn := with[:i], with[i+1:]
	var p probe.Patch
	code, err := withAttached(pid, func(t *probe.Tracer) (err error) {
		p, err = t.Patch(fn, lib, newFn, probe.PatchOptions{Wait: wait, Inlined: inlined})
		return err
	}, wait)
	if err == nil {
		fmt.Printf("patched %s\n", p)
		if len(p.Inlined) > 0 {
			fmt.Fprintf(os.Stderr, "probe: %s is also inlined at %s: the callers there keep the old code\n", p.Func, strings.Join(p.Inlined, ", "))
		}
	}
	return code, err
}

func cmdUnpatch(args []string) (int, error) {
	pid, fn, wait, err := patchArgs(args, "probe unpatch PID FUNC [--wait D]", nil, nil)
	if err != nil {
		return bad("%v", err)
	}
	var p probe.Patch
	code, err := withAttached(pid, func(t *probe.Tracer) (err error) {
		p, err = t.Unpatch(fn, wait)
		return err
	}, wait)
	if err == nil {
		fmt.Printf("unpatched %s: its %d bytes at %#x are the original again\n", p.Func, len(p.Orig), p.Addr)
	}
	return code, err
}

// withAttached attaches to pid, runs do, and detaches, whatever do did.
func withAttached(pid int, do func(t *probe.Tracer) error, wait time.Duration) (int, error) {
	t, err := probe.Attach(pid)
	if err != nil {
		return failure(err)
	}
	t.Start()
	err = do(t)
	if derr := t.Detach(); err == nil && derr != nil {
		err = derr
	}
	if errors.Is(err, probe.ErrBusy) {
		return 1, fmt.Errorf("%v; still so after %v (--wait)", err, wait)
	}
	if err != nil {
		return failure(err)
	}
	return 0, nil
}

func cmdListPatches(args []string) (int, error) {
	if len(args) != 1 {
		return bad("usage: probe list --patches PID")
	}
	pid, err := strconv.Atoi(args[0])
	if err != nil || pid <= 0 {
		return bad("bad PID %q", args[0])
	}
	patches, err := probe.ListPatches(pid)
	if err != nil {
		return failure(err)
	}
	for _, p := range patches {
		fmt.Println(p)
	}
	return 0, nil
}
