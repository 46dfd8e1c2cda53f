package config

import (
	"errors"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/http/httpguts"

	"github.com/retrybroker/retrybroker/internal/egress"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/providers"
	"github.com/retrybroker/retrybroker/internal/store"
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
)

// policyKeys are the fields of a policy, in documentation order.
var policyKeys = []string{
	"extends", "provider", "custom_readers", "retryable_statuses", "max_retries", "max_delay",
	"backoff", "attempt_timeout", "total_timeout", "retry_unsafe_methods",
	"retry_transport_errors", "idempotency_header", "generate_idempotency_key",
	"attempt_header", "max_request_body", "max_response_body", "allow_destinations",
	"allow_ports", "allow_hosts", "max_redirects", "gate_by_credential", "fail_closed", "budget",
	"pacing", "host_providers",
}

var (
	backoffKeys      = []string{"base", "factor", "cap", "jitter"}
	customReaderKeys = []string{"header", "format", "position"}
	budgetKeys       = []string{"disabled", "ratio", "floor_per_second", "window"}
	pacingKeys       = []string{"disabled", "rate", "burst"}
)

// draft is a policy being built from YAML: the policy, plus what is needed
// to merge host maps and to place the engine's validation errors.
type draft struct {
	p tenant.Policy
	// hosts are the policy's own host_providers (inherited from the
	// template it extends, if any); nil when it sets none.
	hosts map[string]string
	// nodes maps engine field names ("backoff.factor") to the key node
	// that set them.
	nodes map[string]*yaml.Node
	// node is the policy's mapping; extends its extends value, if any.
	node, extends *yaml.Node
	// broken is set when a problem was found while reading the policy (or
	// in the policy it extends). Fields that failed to read keep their
	// inherited values, so the engine's checks still run without repeating
	// those problems, but the policy is not used.
	broken bool
}

// readPolicy applies policy mapping n at path over d.p. allowExtends is
// false for shared policies (the top-level policies), which cannot extend.
func (l *loader) readPolicy(d *draft, n *yaml.Node, path string) {
	d.node = n
	d.nodes = make(map[string]*yaml.Node, len(n.Content)/2)
	before := len(l.problems)
	set := func(field string, v *yaml.Node) { d.nodes[field] = v }
	l.mapping(n, path, func(key string, k, v *yaml.Node) {
		fp := join(path, key)
		switch key {
		case "extends":
			// Resolved by the caller before the other fields.
		case "provider":
			if s, ok := l.str(v, fp); ok {
				d.p.Provider = s
				set(key, k)
			}
		case "custom_readers":
			l.readCustomReaders(d, v, fp)
		case "retryable_statuses":
			var set2 engine.StatusSet
			l.sequence(v, fp, func(i int, item *yaml.Node) {
				if c, ok := l.integer(item, index(fp, i), 100, 599); ok {
					set2.Add(int(c))
				}
			})
			d.p.RetryableStatuses = set2
			set(key, k)
		case "max_retries":
			if x, ok := l.integer(v, fp, 0, engine.MaxRetriesLimit); ok {
				d.p.MaxRetries = int(x)
				set(key, k)
			}
		case "max_delay":
			if x, ok := l.duration(v, fp); ok {
				d.p.MaxDelay = x
				set(key, k)
			}
		case "backoff":
			set(key, k)
			l.mapping(v, fp, func(bkey string, bk, bv *yaml.Node) {
				bp := join(fp, bkey)
				switch bkey {
				case "base":
					if x, ok := l.duration(bv, bp); ok {
						d.p.Backoff.Base = x
						set("backoff.base", bk)
					}
				case "factor":
					if x, ok := l.number(bv, bp); ok {
						d.p.Backoff.Factor = x
						set("backoff.factor", bk)
					}
				case "cap":
					if x, ok := l.duration(bv, bp); ok {
						d.p.Backoff.Cap = x
						set("backoff.cap", bk)
					}
				case "jitter":
					if s, ok := l.str(bv, bp); ok {
						m, err := engine.ParseJitterMode(s)
						if err != nil || s == "" {
							l.addf(bv, bp, "unknown jitter mode %s (want full, equal or none)", describe(s))
						} else {
							d.p.Backoff.Jitter = m
						}
					}
				default:
					l.unknownKey(bk, fp, bkey, backoffKeys)
				}
			})
		case "attempt_timeout":
			if x, ok := l.duration(v, fp); ok {
				d.p.AttemptTimeout = x
				set(key, k)
			}
		case "total_timeout":
			if x, ok := l.duration(v, fp); ok {
				d.p.TotalTimeout = x
				set(key, k)
			}
		case "retry_unsafe_methods":
			if b, ok := l.boolean(v, fp); ok {
				d.p.RetryUnsafeMethods = b
			}
		case "retry_transport_errors":
			if b, ok := l.boolean(v, fp); ok {
				d.p.RetryTransportErrors = b
			}
		case "idempotency_header":
			if s, ok := l.str(v, fp); ok {
				if s == "" {
					l.addf(v, fp, "must not be empty (the default is %s)", engine.DefaultIdempotencyKey)
				}
				d.p.IdempotencyHeader = s
				set(key, k)
			}
		case "generate_idempotency_key":
			if b, ok := l.boolean(v, fp); ok {
				d.p.GenerateIdempotencyKey = b
			}
		case "attempt_header":
			if s, ok := l.str(v, fp); ok {
				d.p.AttemptHeader = s
				set(key, k)
			}
		case "max_request_body":
			if x, ok := l.size(v, fp); ok {
				d.p.MaxRequestBody = x
				set(key, k)
			}
		case "max_response_body":
			if x, ok := l.size(v, fp); ok {
				d.p.MaxResponseBody = x
				set(key, k)
			}
		case "allow_destinations":
			var out []string
			l.sequence(v, fp, func(i int, item *yaml.Node) {
				if s, ok := l.str(item, index(fp, i)); ok {
					if p, ok := l.prefix(item, index(fp, i), s); ok {
						out = append(out, p)
					}
				}
			})
			d.p.AllowDestinations = out
		case "allow_ports":
			var out []uint16
			l.sequence(v, fp, func(i int, item *yaml.Node) {
				if x, ok := l.integer(item, index(fp, i), 1, 65535); ok {
					out = append(out, uint16(x))
				}
			})
			slices.Sort(out)
			d.p.AllowPorts = slices.Compact(out)
		case "allow_hosts":
			var out []string
			l.sequence(v, fp, func(i int, item *yaml.Node) {
				if s, ok := l.str(item, index(fp, i)); ok {
					if _, err := egress.NewGuard(egress.AllowHosts(s)); err != nil {
						l.addf(item, index(fp, i), "%s is not a host name or *.suffix pattern", describe(s))
						return
					}
					out = append(out, strings.ToLower(s))
				}
			})
			d.p.AllowHosts = out
		case "max_redirects":
			if x, ok := l.integer(v, fp, 0, MaxRedirectsLimit); ok {
				d.p.MaxRedirects = int(x)
			}
		case "gate_by_credential":
			if b, ok := l.boolean(v, fp); ok {
				d.p.GateByCredential = b
			}
		case "fail_closed":
			if b, ok := l.boolean(v, fp); ok {
				d.p.FailClosed = b
			}
		case "budget":
			l.readBudget(d, v, fp)
		case "pacing":
			l.readPacing(d, v, fp)
		case "host_providers":
			hosts := maps.Clone(d.hosts)
			if hosts == nil {
				hosts = make(map[string]string)
			}
			l.readHostProviders(v, fp, hosts)
			d.hosts = hosts
			set(key, k)
		default:
			l.unknownKey(k, path, key, policyKeys)
		}
	})
	if len(l.problems) > before {
		d.broken = true
	}
}

// readCustomReaders replaces the policy's custom readers.
func (l *loader) readCustomReaders(d *draft, v *yaml.Node, path string) {
	var before, after []providers.HintReader
	l.sequence(v, path, func(i int, item *yaml.Node) {
		ip := index(path, i)
		var header, format, position string
		var headerNode, formatNode *yaml.Node
		position = "before"
		l.mapping(item, ip, func(key string, k, v *yaml.Node) {
			switch key {
			case "header":
				header, _ = l.str(v, join(ip, key))
				headerNode = v
			case "format":
				format, _ = l.str(v, join(ip, key))
				formatNode = v
			case "position":
				if s, ok := l.str(v, join(ip, key)); ok {
					if s != "before" && s != "after" {
						l.addf(v, join(ip, key), "want before or after, got %s", describe(s))
					} else {
						position = s
					}
				}
			default:
				l.unknownKey(k, ip, key, customReaderKeys)
			}
		})
		if item.Kind != yaml.MappingNode {
			return
		}
		if headerNode == nil {
			l.addf(item, join(ip, "header"), "missing: name the header to read, for example X-Wait-Ms")
			return
		}
		if formatNode == nil {
			l.addf(item, join(ip, "format"), "missing: want seconds, milliseconds, unix_seconds, retry_after or iso8601")
			return
		}
		if !httpguts.ValidHeaderFieldName(header) {
			l.addf(headerNode, join(ip, "header"), "%s is not a valid header name", describe(header))
			return
		}
		rd, err := providers.NewCustomReader(header, providers.Format(format))
		if err != nil {
			if errors.Is(err, providers.ErrUnknownFormat) {
				l.addf(formatNode, join(ip, "format"), "unknown format %s (want seconds, milliseconds, unix_seconds, retry_after or iso8601)", describe(format))
			} else {
				l.addf(headerNode, ip, "%v", err)
			}
			return
		}
		if position == "after" {
			after = append(after, rd)
		} else {
			before = append(before, rd)
		}
	})
	d.p.CustomBefore, d.p.CustomAfter = before, after
}

// prefix parses an allowed destination: a CIDR or a single address.
func (l *loader) prefix(n *yaml.Node, path, s string) (string, bool) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			l.addf(n, path, "%s is not a CIDR (10.20.0.0/16, fd00::/8) or an IP address", describe(s))
			return "", false
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()).String(), true
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		l.addf(n, path, "%s is not a valid CIDR: %v", describe(s), errors.Unwrap(err))
		return "", false
	}
	if m := p.Masked(); m != p {
		l.addf(n, path, "%s has bits set beyond the /%d prefix; did you mean %s?", describe(s), p.Bits(), m)
		return "", false
	}
	return p.String(), true
}

// readBudget applies a budget mapping. A budget that was disabled starts
// again from store.DefaultBudget() when the mapping sets any value.
func (l *loader) readBudget(d *draft, v *yaml.Node, path string) {
	b := d.p.Budget
	disabled, anySet := false, false
	var disabledNode *yaml.Node
	if b.Unlimited() {
		b = store.DefaultBudget()
	}
	before := len(l.problems)
	l.mapping(v, path, func(key string, k, val *yaml.Node) {
		fp := join(path, key)
		switch key {
		case "disabled":
			disabled, _ = l.boolean(val, fp)
			disabledNode = val
		case "ratio":
			anySet = true
			if x, ok := l.number(val, fp); ok {
				if x < 0 || x > MaxBudgetRatio {
					l.addf(val, fp, "must be between 0 and %d, got %g", MaxBudgetRatio, x)
				}
				b.Ratio = x
			}
		case "floor_per_second":
			anySet = true
			if x, ok := l.number(val, fp); ok {
				if x < 0 {
					l.addf(val, fp, "must not be negative, got %g", x)
				}
				b.FloorPerSecond = x
			}
		case "window":
			anySet = true
			if x, ok := l.duration(val, fp); ok {
				if x < time.Second || x > MaxBudgetWindowSeconds*time.Second {
					l.addf(val, fp, "must be between 1s and 1h, got %s", x)
				}
				b.Window = x
			}
		default:
			l.unknownKey(k, path, key, budgetKeys)
		}
	})
	if len(l.problems) > before {
		return
	}
	switch {
	case disabled && anySet:
		l.addf(disabledNode, join(path, "disabled"), "a disabled budget takes no ratio, floor_per_second or window")
	case disabled:
		d.p.Budget = store.BudgetConfig{}
	case b.Unlimited():
		l.addf(v, path, "ratio and floor_per_second are both 0, which would allow unlimited retries; write budget: {disabled: true} if that is what you mean, or set max_retries: 0 for no retries")
	default:
		d.p.Budget = b
	}
}

// readPacing applies a pacing mapping.
func (l *loader) readPacing(d *draft, v *yaml.Node, path string) {
	p := d.p.Pace
	disabled, anySet, rateSet := false, false, false
	var disabledNode *yaml.Node
	before := len(l.problems)
	l.mapping(v, path, func(key string, k, val *yaml.Node) {
		fp := join(path, key)
		switch key {
		case "disabled":
			disabled, _ = l.boolean(val, fp)
			disabledNode = val
		case "rate":
			anySet, rateSet = true, true
			if x, ok := l.number(val, fp); ok {
				if !(x > 0) || x > MaxPaceRate {
					l.addf(val, fp, "must be above 0 and at most %d requests per second, got %g (omit pacing, or write pacing: {disabled: true}, to turn it off)", MaxPaceRate, x)
				}
				p.Rate = x
			}
		case "burst":
			anySet = true
			if x, ok := l.integer(val, fp, 1, store.MaxPaceBurst); ok {
				p.Burst = int(x)
			}
		default:
			l.unknownKey(k, path, key, pacingKeys)
		}
	})
	if len(l.problems) > before {
		return
	}
	switch {
	case disabled && anySet:
		l.addf(disabledNode, join(path, "disabled"), "disabled pacing takes no rate or burst")
	case disabled:
		d.p.Pace = store.PaceConfig{}
	case !rateSet && !d.p.Pace.Enabled():
		l.addf(v, join(path, "rate"), "missing: pacing needs a rate in requests per second")
	default:
		if p.Burst < 1 {
			p.Burst = 1
		}
		d.p.Pace = p
	}
}

// readHostProviders adds the entries of a host_providers mapping to into,
// checking each.
func (l *loader) readHostProviders(v *yaml.Node, path string, into map[string]string) {
	l.mapping(v, path, func(host string, k, val *yaml.Node) {
		fp := join(path, host)
		name, ok := l.str(val, fp)
		if !ok {
			return
		}
		if _, err := providers.NewHostMap(map[string]string{host: name}); err != nil {
			switch {
			case errors.Is(err, providers.ErrUnknownProvider):
				l.addf(val, fp, "unknown provider %s (known: %s)", describe(name), strings.Join(providers.Names(), ", "))
			default:
				l.addf(k, fp, "%s is not a host name or a *.suffix wildcard", describe(host))
			}
			return
		}
		into[host] = name
	})
}

// finish builds the policy's host map and validates it with the engine,
// placing each engine error at the field that set the value.
func (l *loader) finish(d *draft, path string) bool {
	if d.hosts != nil {
		merged := maps.Clone(l.hostOverrides)
		if merged == nil {
			merged = make(map[string]string, len(d.hosts))
		}
		maps.Copy(merged, d.hosts)
		hm, err := providers.NewHostMap(merged)
		if err != nil {
			l.addf(d.nodes["host_providers"], join(path, "host_providers"), "%v", err)
			return false
		}
		d.p.HostMap = hm
	} else {
		d.p.HostMap = l.hostMap
	}
	err := d.p.Validate()
	if err == nil {
		return !d.broken
	}
	var fes []*engine.FieldError
	collectFieldErrors(err, &fes)
	if len(fes) == 0 {
		l.addf(d.node, path, "%v", err)
	}
	for _, fe := range fes {
		n := d.nodes[fe.Field]
		suffix := ""
		if n == nil {
			if parent, _, ok := strings.Cut(fe.Field, "."); ok {
				n = d.nodes[parent]
			}
		}
		if n == nil && d.extends != nil {
			n = d.extends
			suffix = " (value inherited through extends)"
		}
		if n == nil {
			n = d.node
		}
		l.addf(n, path+"."+fe.Field, "%s%s", fe.Message, suffix)
	}
	return false
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
