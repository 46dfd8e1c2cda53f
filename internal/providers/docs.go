package providers

import (
	_ "embed"
	"fmt"
	"io"
	"strings"
	"text/template"
)

// docsTemplate is the text of docs/providers.md around the catalog's
// generated parts.
//
//go:embed docs.md.tmpl
var docsTemplate string

// WriteMarkdown writes the documentation of a catalog (docs/providers.md is
// WriteMarkdown of the built-in catalog, written by `make generate` through
// `broker providers docs`).
func WriteMarkdown(w io.Writer, c *Catalog) error {
	t, err := template.New("providers.md").Funcs(template.FuncMap{
		"code":    func(s string) string { return "`" + s + "`" },
		"join":    strings.Join,
		"codes":   func(ss []string) string { return strings.Join(quoteAll(ss), " or ") },
		"oneline": func(s string) string { return strings.Join(strings.Fields(s), " ") },
		"ints":    func(ns []int) string { return joinInts(ns, ", ") },
		"hints":   describeHints,
		"quotas":  describeQuotas,
		"hosts":   func(e *Entry) string { return codeList(e.Hosts()) },
		"extra":   func(e *Entry) string { return joinInts(e.ExtraRetryableStatuses(), ", ") },
		"verdict": func(e *Entry) string {
			out := codeList(e.Spec().ShouldRetry)
			if ne := e.Spec().NotExecuted; len(ne) > 0 {
				out += "; `true` from " + codeList(ne) + " is **not_executed**: the request was not executed, so a retry is safe for any method"
			}
			return out
		},
		"scope":   describeScope,
		"delay":   describeDelay,
		"bodyfor": describeBodyNeeds,
	}).Parse(docsTemplate)
	if err != nil {
		return fmt.Errorf("docs template: %w", err)
	}
	type hostRow struct{ Hosts, Provider string }
	var rows []hostRow
	for _, e := range c.Entries() {
		if len(e.Hosts()) > 0 {
			rows = append(rows, hostRow{codeList(e.Hosts()), e.Name()})
		}
	}
	data := struct {
		Version string
		Entries []*Entry
		Hosts   []hostRow
		Formats []FormatInfo
		Cost    int
		Steps   int
		Value   int
		List    int
		Compare int
	}{c.Version(), c.Entries(), rows, Formats(), RuleCostLimit, MaxRuleIterations, MaxRuleValueBytes >> 20, MaxRuleListLen, MaxRuleCompareBytes >> 20}
	if err := t.Execute(w, data); err != nil {
		return fmt.Errorf("docs template: %w", err)
	}
	return nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + s + "`"
	}
	return out
}

func codeList(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = "`" + s + "`"
	}
	return strings.Join(out, ", ")
}

// describeHints lists an entry's hint steps in priority order.
func describeHints(e *Entry) []string {
	out := make([]string, len(e.hints))
	for i := range e.hints {
		out[i] = e.hints[i].desc
	}
	return out
}

func describeQuotas(e *Entry) []string {
	out := make([]string, len(e.quotas))
	for i := range e.quotas {
		out[i] = e.quotas[i].desc
	}
	return out
}

func describeScope(e *Entry) string {
	s := e.spec.Scope
	if s == nil {
		return ""
	}
	var parts []string
	if s.Global != "" {
		parts = append(parts, "`"+lowerASCII(s.Global)+": true` means `global`")
	}
	if s.Header != "" {
		parts = append(parts, "otherwise `"+lowerASCII(s.Header)+"` gives the scope")
	}
	return strings.Join(parts, "; ")
}

func describeDelay(r RuleSpec) string {
	d := r.Delay
	switch {
	case d == nil && r.Action == "retry":
		return "the readers' hint if any, else backoff"
	case d == nil:
		return ""
	case d.Header != "":
		f := d.Format
		if f == "" {
			f = "retry_after"
		}
		return "header `" + lowerASCII(d.Header) + "` (" + f + ")"
	case d.Body != "":
		u := d.Unit
		if u == "" {
			u = "s"
		}
		return "body field `" + d.Body + "` (" + u + ")"
	}
	return "expression `" + strings.Join(strings.Fields(d.Expr), " ") + "` (seconds)"
}

// describeBodyNeeds lists the statuses for which the entry reads the body.
func describeBodyNeeds(e *Entry) string {
	var ss []int
	for s := 100; s < 600; s++ {
		if e.NeedsBody(s) {
			ss = append(ss, s)
		}
	}
	if len(ss) == 0 {
		return "never"
	}
	allErrors := true
	for s := 400; s < 600; s++ {
		allErrors = allErrors && e.NeedsBody(s)
	}
	var parts []string
	for _, s := range ss {
		if !allErrors || s < 400 {
			parts = append(parts, fmt.Sprint(s))
		}
	}
	if allErrors {
		parts = append(parts, "400-599")
	}
	return strings.Join(parts, ", ")
}
