package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLogFormatJSON (issue 21): with --log-format json every line a real
// broker logs is one JSON object with slog's time, level and msg; an
// unknown format is refused at start.
func TestLogFormatJSON(t *testing.T) {
	p := startProc(t, "--log-format", "json", "--admin-listen", freePort(t))
	logs := p.logs.String()
	sc := bufio.NewScanner(strings.NewReader(logs))
	lines := 0
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Fatalf("log line %q has no %q", sc.Text(), k)
			}
		}
		lines++
	}
	if lines < 2 || !strings.Contains(logs, `"msg":"admin listening"`) {
		t.Fatalf("logs:\n%s", logs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, brokerBin, "--listen", freePort(t), "--log-format", "yaml").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--log-format must be text or json") {
		t.Fatalf("--log-format yaml: %v, %s", err, out)
	}
}
