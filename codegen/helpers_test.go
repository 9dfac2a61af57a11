package codegen

import "github.com/probedbg/probe/internal/testhex"

// hx parses hex bytes written with spaces, e.g. "48 89 e5".
var hx = testhex.Bytes
