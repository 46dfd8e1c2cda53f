// Package vectors loads the conformance vectors in testdata/classify.jsonl
// (the shared vectors) and testdata/catalog.jsonl (the provider catalog's
// vectors, cited in testdata/VECTORS.md), and checks a decision against a
// vector's expectation, so that the engine, the gRPC service and the Go
// client are held to the same files.
package vectors

import (
	"bufio"
	"bytes"
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
	// Rule, when set, is the catalog rule the decision must name ("" for
	// none).
	Rule *string `json:"rule"`
	// Quota, when set, is the quota the provider's reader must report
	// (checked in-process with CheckReading; a decision does not carry it).
	Quota *ExpectQuota `json:"quota"`
	// Scope, when set, is the limit scope the reader must report.
	Scope *string `json:"scope"`
}

// ExpectQuota is a vector's expected quota reading.
type ExpectQuota struct {
	Remaining int64 `json:"remaining"`
	// ResetMS is the reset, in milliseconds after the vector's now.
	ResetMS float64 `json:"reset_ms"`
	Source  string  `json:"source"`
	// Limit is the window's quota; 0 means unknown.
	Limit int64 `json:"limit"`
}

// GotReading is what a provider's reader reported, in layer-neutral form.
type GotReading struct {
	HasQuota  bool
	Remaining int64
	// ResetIn is the quota's reset minus the vector's now.
	ResetIn time.Duration
	Source  string
	Limit   int64
	Scope   string
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
	// Rule is the catalog rule that decided; empty for none.
	Rule string
}

// Files are the vector files under testdata, in the order LoadAll reads
// them.
var Files = []string{"classify.jsonl", "catalog.jsonl"}

// Path finds testdata/classify.jsonl by walking up from the working
// directory to the module root (the directory holding go.mod with the
// testdata folder).
func Path() (string, error) { return PathOf("classify.jsonl") }

// PathOf finds testdata/<name> like Path.
func PathOf(name string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "testdata", name)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("testdata/%s not found above the working directory", name)
		}
		dir = parent
	}
}

// Load reads every vector from the project's testdata copy of the shared
// vectors (classify.jsonl).
func Load() ([]Vector, error) { return LoadFile("classify.jsonl") }

// LoadAll reads every vector of every file in Files; names are unique
// across files.
func LoadAll() ([]Vector, error) {
	var out []Vector
	seen := map[string]string{}
	for _, name := range Files {
		vs, err := LoadFile(name)
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if f, dup := seen[v.Name]; dup {
				return nil, fmt.Errorf("vector %q is in both %s and %s", v.Name, f, name)
			}
			seen[v.Name] = name
		}
		out = append(out, vs...)
	}
	return out, nil
}

// LoadFile reads every vector of testdata/<name>.
func LoadFile(name string) ([]Vector, error) {
	p, err := PathOf(name)
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
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
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
	if e.Rule != nil && got.Rule != *e.Rule {
		bad("rule = %q, want %q", got.Rule, *e.Rule)
	}
	return errors.Join(errs...)
}

// CheckReading compares a reader's quota and scope with the vector's
// expectation. A vector without expect.quota requires that no quota is
// reported; one without expect.scope does not check the scope.
func (v *Vector) CheckReading(got GotReading) error {
	e := v.Expect
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch q := e.Quota; {
	case q == nil && got.HasQuota:
		bad("unexpected quota: %d left, reset in %v from %q", got.Remaining, got.ResetIn, got.Source)
	case q != nil && !got.HasQuota:
		bad("no quota, want %d left", q.Remaining)
	case q != nil:
		ms := float64(got.ResetIn) / float64(time.Millisecond)
		if got.Remaining != q.Remaining || math.Abs(ms-q.ResetMS) > 1 || got.Source != q.Source || got.Limit != q.Limit {
			bad("quota = %d left (limit %d), reset in %v from %q; want %d (limit %d), %vms, %q",
				got.Remaining, got.Limit, got.ResetIn, got.Source, q.Remaining, q.Limit, q.ResetMS, q.Source)
		}
	}
	if e.Scope != nil && got.Scope != *e.Scope {
		bad("scope = %q, want %q", got.Scope, *e.Scope)
	}
	return errors.Join(errs...)
}
