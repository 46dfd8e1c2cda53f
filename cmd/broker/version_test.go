package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	defer func(v, r string) { version, revision = v, r }(version, revision)
	version, revision = "v1.2.3", "0123abcd"
	var out, errb bytes.Buffer
	if code := versionCommand(nil, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if got := out.String(); !strings.HasPrefix(got, "broker v1.2.3 (revision 0123abcd, go") {
		t.Fatalf("version printed %q", got)
	}
	if code := versionCommand([]string{"extra"}, &out, &errb); code != 2 {
		t.Fatalf("extra argument: exit %d, want 2", code)
	}
}
