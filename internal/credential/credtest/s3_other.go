//go:build !linux

package credtest

import "os/exec"

// s3SetParentDeathSignal does nothing where the kernel has no parent death
// signal; cleanups stop the server by its pid.
func s3SetParentDeathSignal(*exec.Cmd) {}
