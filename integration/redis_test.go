package integration

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestRedisCycles: Debian's redis-server under redis-benchmark's load,
// with a client of the test's checking every answer it gets (a counter
// that goes up by one, keys that read back what was written), through
// 20 attach/detach cycles of function_graph and then 10 kills of probe
// by SIGKILL with probes in that stop threads (and in-process ones),
// each followed by an attach of the same function. After every detach the server's mappings have nothing
// of probe's (issue 35: redis died of SIGTRAP at the 2nd-5th cycle, and
// each attach left ~8.9 GB of address space behind; after a kill -9 the
// function could never be probed again; a kill -9 with memcpy's entry
// stopping threads killed it by SIGTRAP).
func TestRedisCycles(t *testing.T) {
	t.Parallel()
	// (By its own name: redis-server is a link to redis-check-rdb, which
	// does what it is called.)
	debianProgram(t, "redis-server", "redis-server")
	server := "/usr/bin/redis-server"
	bench := debianProgram(t, "redis-benchmark", "redis-tools")
	port := freePort(t)
	rs := startBg(t, nil, server, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	c := dialRedis(t, port)
	startBg(t, nil, bench, "-p", port, "-n", "1000000000", "-q", "-c", "8", "-t", "set,get,incr,lpush,lrange_100")
	var (
		stop    atomic.Bool
		checked atomic.Int64
		wrong   atomic.Pointer[error] // the checker's first wrong answer
		wg      sync.WaitGroup
	)
	fail := func(err error) { wrong.CompareAndSwap(nil, &err) }
	wrongAnswer := func() error {
		if p := wrong.Load(); p != nil {
			return *p
		}
		return nil
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := int64(1); !stop.Load(); n++ {
			if got, err := c.do("INCR", "probe-test-counter"); err != nil || got != ":"+strconv.FormatInt(n, 10) {
				fail(fmt.Errorf("INCR number %d: got %q, %v", n, got, err))
				return
			}
			key, val := fmt.Sprintf("probe-test-%d", n%1000), fmt.Sprintf("value-%d", n)
			if got, err := c.do("SET", key, val); err != nil || got != "+OK" {
				fail(fmt.Errorf("SET %s: got %q, %v", key, got, err))
				return
			}
			if got, err := c.do("GET", key); err != nil || got != val {
				fail(fmt.Errorf("GET %s: got %q, want %q, %v", key, got, val, err))
				return
			}
			checked.Add(1)
		}
	}()
	pid := strconv.Itoa(rs.pid())
	ours := func() string { return probeMappings(procMaps(t, rs.pid())) }
	before := ours()
	var last result // the attach before alive's check, for its stderr
	alive := func(what string) {
		t.Helper()
		time.Sleep(200 * time.Millisecond) // the returns in flight come home
		if rs.exited() {
			t.Fatalf("%s: redis-server ended: %v\nprobe before: %v", what, rs.res, last)
		}
		if err := wrongAnswer(); err != nil {
			t.Fatalf("%s: a wrong answer: %v", what, err)
		}
		if got := ours(); got != before {
			t.Fatalf("%s: probe's mappings left in redis-server:\n%s", what, got)
		}
	}
	for i := 0; i < 20; i++ {
		r := probe(t, "attach", "--duration", "500ms", "-o", os.DevNull, "--tracer", "function_graph", pid)
		last = r
		if r.code != 0 || r.stderr != "" { // (a death while attached: "probe: pid N killed by SIGTRAP", exit 0)
			t.Fatalf("cycle %d: %v", i, r)
		}
		alive(fmt.Sprintf("function_graph cycle %d", i))
	}
	count := regexp.MustCompile(`# count of probe/p_processCommand_0: [1-9]\d* hits, 1 key`)
	for i := 0; i < 10; i++ {
		// In turn: the function tracer over libc's mem* (memcpy's entry
		// stops the thread: a branch lands in its first five bytes),
		// and in-process probes with a stopping one among them.
		args, ready := []string{"--tracer", "function_graph", "--filter", "libc:mem*"}, "stop the thread"
		if i%2 == 1 {
			// (-v's lines come sorted by name: lookupKey's is the last.)
			args, ready = []string{"p:processCommand => count", "r:lookupKey $retval => hist:arg1", "p:libc:memcpy"}, "probe/r_lookupKey_0: "
		}
		pr := startBg(t, nil, probeBin, append([]string{"attach", "-v", "-o", os.DevNull, pid}, args...)...)
		waitStderr(t, pr, ready, 30*time.Second)
		if i%2 == 1 {
			for _, want := range []string{"probe/p_memcpy_0: stops the thread", "probe/r_lookupKey_0: in-process"} {
				if !strings.Contains(pr.stderr.String(), want) {
					t.Fatalf("kill %d: want %q: %s", i, want, pr.stderr.String())
				}
			}
		}
		time.Sleep(time.Duration(200+100*(i%5)) * time.Millisecond)
		pr.cmd.Process.Kill()
		pr.wait(t, 10*time.Second)
		time.Sleep(300 * time.Millisecond)
		if rs.exited() || wrongAnswer() != nil {
			t.Fatalf("kill %d (%s): after probe's SIGKILL: %v, %v", i, args[0], rs.res, wrongAnswer())
		}
		r := probe(t, "attach", "--duration", "300ms", pid, "p:processCommand => count")
		last = r
		if r.code != 0 || !count.MatchString(r.stdout) {
			t.Fatalf("kill %d: the attach after it: %v", i, r)
		}
		alive(fmt.Sprintf("the attach after kill %d", i))
	}
	stop.Store(true)
	wg.Wait()
	if err := wrongAnswer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d INCR/SET/GET rounds checked", checked.Load())
	if checked.Load() == 0 {
		t.Fatal("no answer checked")
	}
}

// probeMappings is the lines of maps text that are probe's: its memory
// files, and anonymous executable mappings (its out-of-line pages).
func probeMappings(maps string) string {
	var b strings.Builder
	for _, line := range strings.Split(maps, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && (strings.Contains(line, "/memfd:probe") || len(f) == 5 && strings.Contains(f[1], "x")) {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// freePort returns a TCP port on the loopback that nothing listens on.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// redisConn is a connection speaking RESP, enough for INCR, SET and GET.
type redisConn struct {
	conn net.Conn
	r    *bufio.Reader
}

// dialRedis connects to the server on port, waiting for it to listen.
func dialRedis(t *testing.T, port string) *redisConn {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := net.Dial("tcp", "127.0.0.1:"+port)
		if err == nil {
			t.Cleanup(func() { conn.Close() })
			return &redisConn{conn: conn, r: bufio.NewReader(conn)}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on port %s: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// do sends a command and returns its reply: a status or integer line as
// sent (+OK, :5), a bulk string's text.
func (c *redisConn) do(args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	c.conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if !strings.HasPrefix(line, "$") {
		return line, nil
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 0 {
		return line, err
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(c.r, buf); err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}
