module github.com/probedbg/probe

go 1.26.0

require (
	github.com/creack/pty v1.1.24
	github.com/ergochat/readline v0.1.3
	github.com/google/pprof v0.0.0-20260906184651-6331bc6350fe
	github.com/ianlancetaylor/demangle v0.0.0-20260724033716-83e58baca724
	golang.org/x/arch v0.32.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
)

require github.com/goccy/go-yaml v1.19.2

require golang.org/x/text v0.40.0 // indirect

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/go-delve/delve v1.27.2
	golang.org/x/telemetry v0.0.0-20241106142447-58a1122356f5 // indirect
)
