module github.com/probedbg/probe

go 1.26.0

require (
	golang.org/x/arch v0.32.0
	golang.org/x/sys v0.49.0
)
