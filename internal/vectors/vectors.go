// Package vectors loads the conformance vectors in testdata/classify.jsonl
// and checks a decision against a vector's expectation, so that the engine,
// the gRPC service and the Go client are held to the same file.
package vectors

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"time"
)

// Vector is one line of classify.jsonl.
type Vector struct {
	Name           string      `json:"name"`
	Method         string      `json:"method"`
	Status         int         `json:"status"`
	TransportError string      `json:"transport_error"`
	Headers        [][2]string `json:"headers"`
	Body           string      `json:"body"`
	Provider       string      `json:"provider"`
	Attempt        int         `json:"attempt"`
	Now            time.Time   `json:"now"`
	Expect         Expect      `json:"expect"`
}

// Expect is a vector's expected decision. Pointer fields are optional.
type Expect struct {
	Action     string   `json:"action"`
	DelayMS    *float64 `json:"delay_ms"`
	DelayMaxMS *float64 `json:"delay_max_ms"`
	HintSource *string  `json:"hint_source"`
	Reason     string   `json:"reason"`
	HintMS     *float64 `json:"hint_ms"`
}

// Got is a decision in layer-neutral form.
type Got struct {
	// Action is "retry" or "do_not_retry".
	Action string
	// Delay is the wait (retry only).
	Delay time.Duration
	// HintSource is the header that set the delay.
	HintSource string
	// Reason is the proto enum name, e.g. "REASON_SERVER_HINT".
	Reason string
	// Hint is the reported server hint; HasHint says whether one was reported.
	Hint    time.Duration
	HasHint bool
}

// Path finds testdata/classify.jsonl by walking up from the working
// directory to the module root (the directory holding go.mod with the
// testdata folder).
func Path() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "testdata", "classify.jsonl")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testdata/classify.jsonl not found above the working directory")
		}
		dir = parent
	}
}

// Load reads every vector from the project's testdata copy.
func Load() ([]Vector, error) {
	p, err := Path()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Vector
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	line := 0
	seen := map[string]bool{}
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var v Vector
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", p, line, err)
		}
		if v.Name == "" || seen[v.Name] {
			return nil, fmt.Errorf("%s:%d: missing or duplicate name %q", p, line, v.Name)
		}
		seen[v.Name] = true
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no vectors", p)
	}
	return out, nil
}

// Check compares got with the vector's expectation and describes every
// mismatch. A fractional-seconds hint may be off by at most 1 ms.
func (v *Vector) Check(got Got) error {
	e := v.Expect
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if got.Action != e.Action {
		bad("action = %q, want %q", got.Action, e.Action)
	}
	if e.Reason != "" && got.Reason != e.Reason {
		bad("reason = %s, want %s", got.Reason, e.Reason)
	}
	if e.Action == "retry" {
		ms := float64(got.Delay) / float64(time.Millisecond)
		if e.DelayMS != nil && math.Abs(ms-*e.DelayMS) > 1 {
			bad("delay = %v, want %vms", got.Delay, *e.DelayMS)
		}
		if e.DelayMaxMS != nil && (got.Delay < 0 || ms > *e.DelayMaxMS) {
			bad("delay = %v, want within [0, %vms]", got.Delay, *e.DelayMaxMS)
		}
	}
	if e.HintSource != nil && got.HintSource != *e.HintSource {
		bad("hint_source = %q, want %q", got.HintSource, *e.HintSource)
	}
	if e.HintMS != nil {
		ms := float64(got.Hint) / float64(time.Millisecond)
		if !got.HasHint || math.Abs(ms-*e.HintMS) > 1 {
			bad("hint = %v (present %v), want %vms", got.Hint, got.HasHint, *e.HintMS)
		}
	}
	return errors.Join(errs...)
}
