package config

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalid is wrapped by the error Check returns for a file that loads
// but fails validation.
var ErrInvalid = errors.New("invalid configuration")

// Problem is one thing wrong with a configuration file, located precisely
// enough for a person to fix it.
type Problem struct {
	// File is the file name as given to Load or Parse.
	File string
	// Line and Column are 1-based; 0 when unknown (for example an empty
	// file).
	Line, Column int
	// Path is the field in dotted form with 0-based list indices, for
	// example "tenants[1].policies.default.backoff.factor"; empty for the
	// document as a whole.
	Path string
	// Message says what is wrong and, where possible, what would be right.
	// It never repeats a value that might be a secret (API key fields).
	Message string
}

// Error formats the problem as "file:line:column: path: message", leaving
// out the parts that are unknown.
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		b.WriteString(":" + strconv.Itoa(p.Line))
		if p.Column > 0 {
			b.WriteString(":" + strconv.Itoa(p.Column))
		}
	}
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error reports every problem found in one configuration file, sorted by
// position. Load and Parse return it (as *Error) when the file is not a
// valid configuration; errors.As reaches it, and errors.As on a *Problem
// reaches the first problem.
type Error struct {
	// File is the file name as given to Load or Parse.
	File string
	// Problems are in file order; there is at least one.
	Problems []*Problem
}

// Error returns one problem per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap returns the problems, so errors.As can find a *Problem.
func (e *Error) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// sortProblems orders problems by position, keeping the discovery order of
// problems at the same position.
func sortProblems(ps []*Problem) {
	slices.SortStableFunc(ps, func(a, b *Problem) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
}

// yamlLineRe matches the position yaml.v3 puts in its syntax errors.
var yamlLineRe = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// syntaxProblem turns a yaml.v3 parse error into a Problem.
func syntaxProblem(file string, err error) *Problem {
	p := &Problem{File: file, Message: "invalid YAML: " + err.Error()}
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		p.Message = "invalid YAML: " + m[2]
		if m[1] != "" {
			p.Line, _ = strconv.Atoi(m[1])
		}
	}
	return p
}

// describe names a value for messages without echoing it at length.
func describe(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%q...", s[:77])
	}
	return strconv.Quote(s)
}
