module github.com/probedbg/probe

go 1.26.0

require (
	golang.org/x/arch v0.32.0
	golang.org/x/sys v0.49.0
)

require github.com/go-delve/delve v1.27.2 // indirect
