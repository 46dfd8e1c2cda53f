//go:build !linux

package broker_test

import "os/exec"

// dieWithTest has no parent-death signal to set outside Linux; cleanups
// stop every broker by its pid.
func dieWithTest(*exec.Cmd) {}
