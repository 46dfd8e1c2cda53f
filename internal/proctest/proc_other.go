//go:build !linux

package proctest

import "syscall"

func setPdeathsig(*syscall.SysProcAttr) {}
