//go:build !linux

package credtest

import "os/exec"

// setParentDeathSignal does nothing outside Linux: cleanups stop every
// server by its pid.
func setParentDeathSignal(*exec.Cmd) {}
