package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/tenant"
)

// Limits of policy options the engine does not bound itself.
const (
	// MaxRedirectsLimit bounds max_redirects.
	MaxRedirectsLimit = 20
	// MaxBudgetRatio bounds budget.ratio.
	MaxBudgetRatio = 100
	// MaxBudgetWindowSeconds bounds budget.window, in seconds.
	MaxBudgetWindowSeconds = 3600
	// MaxPaceRate bounds pacing.rate, in requests per second.
	MaxPaceRate = 1_000_000
	// MaxBreakerMinCalls bounds breaker.min_calls.
	MaxBreakerMinCalls = 100_000
)

// The lists of a policy.
type (
	customReaders = list[customReaderDoc, *customReaderDoc]
	statuses      = list[intIn[statusRange], *intIn[statusRange]]
	prefixes      = list[prefix, *prefix]
	ports         = list[intIn[portRange], *intIn[portRange]]
	hostPatterns  = list[hostPattern, *hostPattern]
)

// policyDoc is a policy as written in the file: a shared policy under the
// top-level policies, or a tenant's own. A nil field is not set, and the
// policy keeps the value it inherits: from the shared policy it extends, or
// else from the standard policy. Lists replace what they inherit; sections
// (backoff, budget, ...) override only the keys they set. The fields are in
// the order of docs/policy.md, which is also the order messages list them
// in.
type policyDoc struct {
	section
	Extends                *str                   `yaml:"extends"`
	Provider               *str                   `yaml:"provider"`
	CustomReaders          *customReaders         `yaml:"custom_readers"`
	RetryableStatuses      *statuses              `yaml:"retryable_statuses"`
	MaxRetries             *intIn[retriesRange]   `yaml:"max_retries"`
	MaxDelay               *duration              `yaml:"max_delay"`
	MaxGate                *duration              `yaml:"max_gate"`
	Backoff                *backoffDoc            `yaml:"backoff"`
	AttemptTimeout         *duration              `yaml:"attempt_timeout"`
	TotalTimeout           *duration              `yaml:"total_timeout"`
	RetryUnsafeMethods     *boolean               `yaml:"retry_unsafe_methods"`
	RetryTransportErrors   *boolean               `yaml:"retry_transport_errors"`
	IdempotencyHeader      *idempotencyHeader     `yaml:"idempotency_header"`
	GenerateIdempotencyKey *boolean               `yaml:"generate_idempotency_key"`
	AttemptHeader          *attemptHeader         `yaml:"attempt_header"`
	MaxRequestBody         *size                  `yaml:"max_request_body"`
	MaxResponseBody        *size                  `yaml:"max_response_body"`
	Stream                 *streamDoc             `yaml:"stream"`
	AllowDestinations      *prefixes              `yaml:"allow_destinations"`
	AllowPorts             *ports                 `yaml:"allow_ports"`
	AllowHosts             *hostPatterns          `yaml:"allow_hosts"`
	MaxRedirects           *intIn[redirectsRange] `yaml:"max_redirects"`
	GateByCredential       *boolean               `yaml:"gate_by_credential"`
	FailClosed             *boolean               `yaml:"fail_closed"`
	Credential             *credentialName        `yaml:"credential"`
	Budget                 *budgetDoc             `yaml:"budget"`
	Pacing                 *pacingDoc             `yaml:"pacing"`
	Learning               *learningDoc           `yaml:"learning"`
	Breaker                *breakerDoc            `yaml:"breaker"`
	HostProviders          *hostProviders         `yaml:"host_providers"`
}

// UnmarshalYAML decodes a policy mapping; null is an empty policy.
func (d *policyDoc) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &d.section, d, "a policy (a mapping of options)")
}

// applyTo sets on p every option d sets. hosts are the host_providers p
// inherits (nil for none); the result adds d's own. The problems returned
// are those that depend on what p inherits (a budget that ends up
// unlimited, pacing without a rate, ...).
func (d *policyDoc) applyTo(p *tenant.Policy, hosts map[string]string) (map[string]string, issues) {
	d.applyRetries(&p.Policy)
	d.applyLimits(&p.Policy)
	d.applyEgress(p)
	errs := d.applySections(p)
	if d.HostProviders != nil {
		hosts = maps.Clone(hosts)
		if hosts == nil {
			hosts = make(map[string]string, len(d.HostProviders.hosts))
		}
		maps.Copy(hosts, d.HostProviders.hosts)
	}
	return hosts, errs
}

// applyRetries applies the options that decide whether and when to retry.
func (d *policyDoc) applyRetries(p *engine.Policy) {
	set(&p.Provider, d.Provider)
	if d.CustomReaders != nil {
		p.CustomBefore, p.CustomAfter = readersOf(d.CustomReaders.Items)
	}
	if d.RetryableStatuses != nil {
		var s engine.StatusSet
		for _, c := range d.RetryableStatuses.Items {
			s.Add(c.V)
		}
		p.RetryableStatuses = s
	}
	set(&p.MaxRetries, d.MaxRetries)
	set(&p.MaxDelay, d.MaxDelay)
	set(&p.MaxGate, d.MaxGate)
	if d.Backoff != nil {
		d.Backoff.applyTo(&p.Backoff)
	}
	set(&p.RetryUnsafeMethods, d.RetryUnsafeMethods)
	set(&p.RetryTransportErrors, d.RetryTransportErrors)
	set(&p.IdempotencyHeader, d.IdempotencyHeader)
	set(&p.GenerateIdempotencyKey, d.GenerateIdempotencyKey)
	set(&p.AttemptHeader, d.AttemptHeader)
}

// applyLimits applies timeouts, body sizes and stream limits.
func (d *policyDoc) applyLimits(p *engine.Policy) {
	set(&p.AttemptTimeout, d.AttemptTimeout)
	set(&p.TotalTimeout, d.TotalTimeout)
	set(&p.MaxRequestBody, d.MaxRequestBody)
	set(&p.MaxResponseBody, d.MaxResponseBody)
	if d.Stream != nil {
		d.Stream.applyTo(&p.Stream)
	}
}

// applyEgress applies what the policy may reach.
func (d *policyDoc) applyEgress(p *tenant.Policy) {
	if d.AllowDestinations != nil {
		p.AllowDestinations = values(d.AllowDestinations.Items)
	}
	if d.AllowPorts != nil {
		var out []uint16
		for _, port := range d.AllowPorts.Items {
			out = append(out, uint16(port.V))
		}
		slices.Sort(out)
		p.AllowPorts = slices.Compact(out)
	}
	if d.AllowHosts != nil {
		p.AllowHosts = values(d.AllowHosts.Items)
	}
	set(&p.MaxRedirects, d.MaxRedirects)
	set(&p.GateByCredential, d.GateByCredential)
	set(&p.CredentialName, d.Credential)
	set(&p.FailClosed, d.FailClosed)
}

// applySections applies budget, pacing, learning and breaker, which
// override only the keys they set. A section with a problem of its own is
// not applied, so that it causes no second problem.
func (d *policyDoc) applySections(p *tenant.Policy) issues {
	var errs issues
	if b := d.Budget; b != nil && !b.bad {
		var err error
		p.Budget, err = b.apply(p.Budget)
		errs.under(".budget", err)
	}
	if pc := d.Pacing; pc != nil && !pc.bad {
		var err error
		p.Pace, err = pc.apply(p.Pace)
		errs.under(".pacing", err)
	}
	if lc := d.Learning; lc != nil && !lc.bad {
		var err error
		p.Learning, err = lc.apply(p.Learning)
		errs.under(".learning", err)
	}
	if bc := d.Breaker; bc != nil && !bc.bad {
		var err error
		p.Breaker, err = bc.apply(p.Breaker)
		errs.under(".breaker", err)
	}
	return errs
}

// agreement is a field the engine checks against another one.
type agreement struct {
	other string // the field it is checked against
	hint  string // how to resolve a contradiction
}

// agreesWith lists, by engine field, the fields checked against another
// one: when a policy inherits the field through extends and sets only the
// other one, the problem is placed on the other one.
var agreesWith = map[string]agreement{
	"max_gate": {"max_delay", "set max_gate in this policy, or lower max_delay"},
}

// reportInvalid reports the engine's validation errors of the policy
// decoded from doc at path, each at the key that set the field (see
// fieldPlace). ext is the node of doc's extends value, if any.
func (l *loader) reportInvalid(err error, doc *policyDoc, path string, ext *yaml.Node) {
	var fes []*engine.FieldError
	collectFieldErrors(err, &fes)
	if len(fes) == 0 {
		l.addf(doc.node, path, "%v", err)
	}
	for _, fe := range fes {
		n, note := fieldPlace(doc, fe.Field, ext)
		l.addf(n, path+"."+fe.Field, "%s%s", fe.Message, note)
	}
}

// fieldPlace returns where to report a problem with the engine's dotted
// field (for example "backoff.factor") of the policy decoded from doc, and
// a note to add to the message. In order: the key that sets the field; the
// key of its section ("backoff"); the key of the field it is checked
// against (max_delay for max_gate) when the field itself is inherited
// through extends; the extends value; the policy.
func fieldPlace(doc *policyDoc, field string, ext *yaml.Node) (*yaml.Node, string) {
	if k := fieldKey(doc.node, field); k != nil {
		return k, ""
	}
	if parent, _, ok := strings.Cut(field, "."); ok {
		if k := keyNode(doc.node, parent); k != nil {
			return k, ""
		}
	}
	if ext == nil {
		return doc.node, ""
	}
	if a, ok := agreesWith[field]; ok {
		if k := fieldKey(doc.node, a.other); k != nil {
			return k, fmt.Sprintf(" (%s is inherited through extends; %s)", field, a.hint)
		}
	}
	return ext, " (value inherited through extends)"
}

// fieldKey returns the key node of a dotted field ("backoff.factor") in
// mapping m, or nil when the mapping does not set it.
func fieldKey(m *yaml.Node, field string) *yaml.Node {
	for {
		head, rest, nested := strings.Cut(field, ".")
		if !nested {
			return keyNode(m, head)
		}
		if m = valueNode(m, head); m == nil {
			return nil
		}
		field = rest
	}
}

// collectFieldErrors flattens joined errors into the engine's field errors.
func collectFieldErrors(err error, out *[]*engine.FieldError) {
	if fe, ok := err.(*engine.FieldError); ok {
		*out = append(*out, fe)
		return
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			collectFieldErrors(e, out)
		}
	}
}

// readersOf returns the custom readers of a policy, in list order, split
// by position. Entries that failed to decode are left out (and reported).
func readersOf(items []customReaderDoc) (before, after []providers.HintReader) {
	for i := range items {
		c := &items[i]
		switch {
		case c.reader == nil:
		case c.Position != nil && c.Position.V:
			after = append(after, c.reader)
		default:
			before = append(before, c.reader)
		}
	}
	return before, after
}
