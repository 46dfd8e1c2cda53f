//go:build !linux

package suite

import "os/exec"

// setParentDeathSignal does nothing outside Linux, which has no parent
// death signal: the suite stops every child by its pid, and a child of a
// suite killed outright outlives it.
func setParentDeathSignal(*exec.Cmd) {}
