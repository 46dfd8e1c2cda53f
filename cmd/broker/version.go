package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and revision are set at link time by the Makefile and the
// Dockerfile (-ldflags "-X main.version=... -X main.revision=..."); the
// image's OCI labels org.opencontainers.image.version and .revision carry
// the same values. A binary built without them reports "dev" and the VCS
// revision Go recorded, if any.
var (
	version  = "dev"
	revision = ""
)

// buildRevision returns revision, or the vcs.revision Go stamped into the
// binary when the link did not set it, or "unknown".
func buildRevision() string {
	if revision != "" {
		return revision
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// versionCommand prints "broker VERSION (revision REV, GOVERSION)" to
// stdout and returns the exit code: 0, or 2 when given arguments.
func versionCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintln(stderr, "usage: broker version")
		return 2
	}
	fmt.Fprintf(stdout, "broker %s (revision %s, %s)\n", version, buildRevision(), runtime.Version())
	return 0
}
