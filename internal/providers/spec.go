package providers

import (
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"
)

// CatalogSpec is the declarative form of a provider catalog: the embedded
// built-in catalog (catalog.yaml). The providers an operator defines in the
// configuration have the shape of its entries (internal/config decodes
// them, with their positions, into EntrySpecs).
type CatalogSpec struct {
	// Version identifies the catalog's content, e.g. "2026.12.1". The
	// built-in catalog's version is printed by `broker providers list`.
	Version string `yaml:"version"`
	// Providers are the entries, in the order they are documented.
	Providers []EntrySpec `yaml:"providers"`
}

// EntrySpec is one provider of a catalog, as written in YAML. Compile turns
// it into an Entry.
type EntrySpec struct {
	// Name is how policies and calls name the provider ("github"): lower-case
	// letters, digits, '-' and '_'.
	Name string `yaml:"name"`
	// Title is the provider's display name ("GitHub REST API").
	Title string `yaml:"title,omitempty"`
	// Docs are links to the provider's own documentation of the signals.
	Docs []string `yaml:"docs,omitempty"`
	// Notes are remarks printed in the generated documentation.
	Notes []string `yaml:"notes,omitempty"`
	// Hosts are the request hosts the provider serves, for choosing a
	// provider from a URL: exact names or "*.suffix" wildcards.
	Hosts []string `yaml:"hosts,omitempty"`
	// RetryStatuses are statuses the provider adds to the policy's retryable
	// list (529 for Anthropic).
	RetryStatuses []int `yaml:"retry_statuses,omitempty"`
	// Hints are the header (and body) readers in priority order: the first
	// valid hint wins.
	Hints []HintSpec `yaml:"hints,omitempty"`
	// ShouldRetry are headers whose value "true" or "false" allows or
	// forbids a retry of an error response (status >= 400), in priority
	// order (Stripe-Should-Retry, x-should-retry).
	ShouldRetry []string `yaml:"should_retry,omitempty"`
	// NotExecuted names those of the ShouldRetry headers whose "true" also
	// says that the request was not executed, so that a retry is safe for
	// any method (POST included), as the provider's own SDKs do (OpenAI's
	// and Anthropic's x-should-retry). Mark only what the provider
	// documents.
	NotExecuted []string `yaml:"not_executed,omitempty"`
	// Quotas are the quota signals in priority order: the first that reads
	// feeds the gate's quota tracking.
	Quotas []QuotaSpec `yaml:"quotas,omitempty"`
	// Scope names the headers that say which limit a refusal came from.
	Scope *ScopeSpec `yaml:"scope,omitempty"`
	// Rules are conditions over the whole response, tried in order after
	// the readers; the first that matches decides.
	Rules []RuleSpec `yaml:"rules,omitempty"`
}

// HintSpec is one step of a provider's hint readers. Exactly one of Header,
// Body (or a body format) and Longest is set.
type HintSpec struct {
	// Header is the response header that carries the delay.
	Header string `yaml:"header,omitempty"`
	// Body is the dotted path of a JSON body field that carries the delay
	// (format json_seconds), e.g. "retry_after". Body steps are read only
	// for error responses (status >= 400).
	Body string `yaml:"body,omitempty"`
	// Format is how the value encodes the delay; see Formats. Empty means
	// retry_after for a header and json_seconds for a body field.
	Format string `yaml:"format,omitempty"`
	// Statuses limits the step to these statuses; empty means any.
	Statuses []int `yaml:"statuses,omitempty"`
	// WhenZero limits the step to responses whose count header of this
	// name is present, valid and 0 (x-ratelimit-remaining).
	WhenZero string `yaml:"when_zero,omitempty"`
	// Longest groups alternatives: the longest valid delay among them wins
	// (the first on a tie).
	Longest []HintSpec `yaml:"longest,omitempty"`
}

// QuotaSpec is one quota signal: a remaining count and when it resets.
type QuotaSpec struct {
	// Remaining is the header holding the remaining count.
	Remaining string `yaml:"remaining,omitempty"`
	// RemainingPrefix reads every header whose name starts with this prefix
	// as a remaining count; the smallest valid count wins (Azure Resource
	// Manager's x-ms-ratelimit-remaining-*).
	RemainingPrefix string `yaml:"remaining_prefix,omitempty"`
	// Reset is the header holding the reset, in Format.
	Reset string `yaml:"reset,omitempty"`
	// Format is the reset's format; see Formats. For Header it is
	// ietf_ratelimit.
	Format string `yaml:"format,omitempty"`
	// ResetIn is the reset to assume, counted from the response, when the
	// provider sends none (Azure's token bucket refills every second).
	ResetIn Duration `yaml:"reset_in,omitempty"`
	// Limit is the header holding the window's quota (RateLimit-Limit).
	Limit string `yaml:"limit,omitempty"`
	// Header is a structured quota header (the IETF RateLimit field), read
	// with Format ietf_ratelimit.
	Header string `yaml:"header,omitempty"`
	// Policy is the IETF RateLimit-Policy header that describes Header's
	// items (quota unit, window, quota size).
	Policy string `yaml:"policy,omitempty"`
}

// ScopeSpec names the headers that report a limit's scope.
type ScopeSpec struct {
	// Header holds the scope itself ("user", "global", "shared").
	Header string `yaml:"header,omitempty"`
	// Global is a header whose value "true" means the global scope.
	Global string `yaml:"global,omitempty"`
}

// RuleSpec is a catalog rule: a CEL condition over the response and the
// outcome when it holds.
type RuleSpec struct {
	// Name identifies the rule within its entry ("insufficient_quota"):
	// lower-case letters, digits and '_'. Decisions report "entry/name".
	Name string `yaml:"name"`
	// Statuses limits the rule to these statuses; empty means any. The
	// condition is not evaluated for other statuses, so listing them keeps
	// other responses off the CEL path.
	Statuses []int `yaml:"statuses,omitempty"`
	// BodyContains, when set, is a cheap prefilter: the condition is
	// evaluated only when the raw body contains at least one of these byte
	// strings (case-sensitive). It keeps ordinary responses off the CEL and
	// JSON path (every Shopify 200 would otherwise be parsed).
	BodyContains []string `yaml:"body_contains,omitempty"`
	// When is the condition, a CEL expression of type bool. It sees status
	// (int), method (string), attempt (int), headers (map of lower-case
	// name to list of values), body (the body parsed as JSON, or null) and
	// body_text (the body as a string).
	When string `yaml:"when"`
	// Action is "retry" or "do_not_retry".
	Action string `yaml:"action"`
	// Reason says why, in words, for do_not_retry rules (and the docs).
	Reason string `yaml:"reason,omitempty"`
	// Delay, for retry rules, is where the wait comes from; without it the
	// readers' hint, if any, or backoff applies.
	Delay *DelaySpec `yaml:"delay,omitempty"`
	// NotExecuted, for retry rules, says that a response the rule matches
	// was refused before the request was executed (Shopify's THROTTLED, a
	// provider that documents that its 429s are refused before any work),
	// so that a retry is safe for any method. Mark only what the provider
	// documents.
	NotExecuted bool `yaml:"not_executed,omitempty"`
}

// DelaySpec is where a rule's delay comes from: exactly one of Header, Body
// and Expr.
type DelaySpec struct {
	// Header is a header holding the delay in Format.
	Header string `yaml:"header,omitempty"`
	// Format is Header's format; empty means retry_after.
	Format string `yaml:"format,omitempty"`
	// Body is the dotted path of a JSON number in the body.
	Body string `yaml:"body,omitempty"`
	// Unit is Body's unit: "s" (default) or "ms".
	Unit string `yaml:"unit,omitempty"`
	// Expr is a CEL expression giving the delay as a duration or as a
	// number of seconds (int or double). A negative result, NaN or one
	// beyond time.Duration is an invalid hint (backoff applies); 0 is valid.
	Expr string `yaml:"expr,omitempty"`
}

// Duration is a time.Duration written in YAML as a Go duration string
// ("1s", "1m30s").
type Duration time.Duration

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	var s string
	if err := n.Decode(&s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a Go duration string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// IsZero reports whether d is 0, so omitempty leaves it out.
func (d Duration) IsZero() bool { return d == 0 }
