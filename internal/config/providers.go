package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/retrybroker/retrybroker/internal/providers"
)

// This file decodes the providers an operator defines (the top-level
// providers mapping and each tenant's) and builds the layered catalogs
// policies resolve provider names through: the built-in catalog, the file's
// providers on top, and a tenant's own on top of those.
//
// An entry is decoded into providerDoc, whose keys are those of the
// embedded catalog's entries (providers.EntrySpec) plus extends; its name
// is its key. Decoding checks types and keys only. What an entry means is
// checked by providers.Compile, the same code that compiles the built-in
// catalog, and each of its SpecErrors (a field path in the entry, and for a
// CEL expression a line and column inside the expression) is placed on the
// file: the path is walked down the entry's nodes, and a position inside an
// expression is mapped onto the scalar that holds it (source.textPosition).

// The lists of a provider entry.
type (
	strs      = list[str, *str]
	hintDocs  = list[hintDoc, *hintDoc]
	quotaDocs = list[quotaDoc, *quotaDoc]
	ruleDocs  = list[ruleDoc, *ruleDoc]
	// providerDocs is a providers mapping: name -> entry.
	providerDocs = dict[providerDoc, *providerDoc]
)

// providerDoc is one provider entry as written. A nil field is not set:
// an entry that extends another keeps what it inherits, a new entry has
// nothing there.
type providerDoc struct {
	section
	Extends       *str       `yaml:"extends"`
	Title         *str       `yaml:"title"`
	Docs          *strs      `yaml:"docs"`
	Notes         *strs      `yaml:"notes"`
	Hosts         *strs      `yaml:"hosts"`
	RetryStatuses *statuses  `yaml:"retry_statuses"`
	Hints         *hintDocs  `yaml:"hints"`
	ShouldRetry   *strs      `yaml:"should_retry"`
	NotExecuted   *strs      `yaml:"not_executed"`
	Quotas        *quotaDocs `yaml:"quotas"`
	Scope         *scopeDoc  `yaml:"scope"`
	Rules         *ruleDocs  `yaml:"rules"`
}

// UnmarshalYAML decodes an entry; null is an empty entry.
func (d *providerDoc) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &d.section, d, "a provider (a mapping with extends, hints, rules, ...)")
}

// hintDoc is one of an entry's hints (providers.HintSpec).
type hintDoc struct {
	section
	Header   *str      `yaml:"header"`
	Body     *str      `yaml:"body"`
	Format   *str      `yaml:"format"`
	Statuses *statuses `yaml:"statuses"`
	WhenZero *str      `yaml:"when_zero"`
	Longest  *hintDocs `yaml:"longest"`
}

// UnmarshalYAML decodes a hint step.
func (h *hintDoc) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &h.section, h, wantMapping)
}

// quotaDoc is one of an entry's quota signals (providers.QuotaSpec).
type quotaDoc struct {
	section
	Remaining       *str      `yaml:"remaining"`
	RemainingPrefix *str      `yaml:"remaining_prefix"`
	Reset           *str      `yaml:"reset"`
	Format          *str      `yaml:"format"`
	ResetIn         *duration `yaml:"reset_in"`
	Limit           *str      `yaml:"limit"`
	Header          *str      `yaml:"header"`
	Policy          *str      `yaml:"policy"`
}

// UnmarshalYAML decodes a quota signal.
func (q *quotaDoc) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &q.section, q, wantMapping)
}

// scopeDoc is an entry's scope headers (providers.ScopeSpec).
type scopeDoc struct {
	section
	Header *str `yaml:"header"`
	Global *str `yaml:"global"`
}

// UnmarshalYAML decodes the scope mapping.
func (s *scopeDoc) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &s.section, s, wantMapping)
}

// ruleDoc is one of an entry's rules (providers.RuleSpec).
type ruleDoc struct {
	section
	Name         *str      `yaml:"name"`
	Statuses     *statuses `yaml:"statuses"`
	BodyContains *strs     `yaml:"body_contains"`
	When         *str      `yaml:"when"`
	Action       *str      `yaml:"action"`
	Reason       *str      `yaml:"reason"`
	Delay        *delayDoc `yaml:"delay"`
	NotExecuted  *boolean  `yaml:"not_executed"`
}

// UnmarshalYAML decodes a rule. A rule without a name is refused here: an
// entry that extends another merges rules by name.
func (r *ruleDoc) UnmarshalYAML(n *yaml.Node) error {
	errs := asIssues(decodeStruct(n, &r.section, r, "a rule (a mapping with name, when, action, ...)"))
	if usable(errs.err(), n) && r.key("name") == nil {
		errs.addf(n, ".name", "missing: every rule has a name (lower-case letters, digits and '_')")
	}
	return r.finish(errs)
}

// delayDoc is a rule's delay (providers.DelaySpec).
type delayDoc struct {
	section
	Header *str `yaml:"header"`
	Format *str `yaml:"format"`
	Body   *str `yaml:"body"`
	Unit   *str `yaml:"unit"`
	Expr   *str `yaml:"expr"`
}

// UnmarshalYAML decodes a delay mapping.
func (d *delayDoc) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &d.section, d, wantMapping)
}

// text returns the value of an optional string.
func textOf(s *str) string {
	if s == nil {
		return ""
	}
	return s.V
}

// textsOf returns the values of an optional list of strings.
func textsOf(l *strs) []string {
	if l == nil {
		return nil
	}
	return values(l.Items)
}

// statusesOf returns the values of an optional list of statuses.
func statusesOf(l *statuses) []int {
	if l == nil {
		return nil
	}
	return values(l.Items)
}

func (h *hintDoc) spec() providers.HintSpec {
	s := providers.HintSpec{
		Header: textOf(h.Header), Body: textOf(h.Body), Format: textOf(h.Format),
		Statuses: statusesOf(h.Statuses), WhenZero: textOf(h.WhenZero),
	}
	if h.Longest != nil {
		for i := range h.Longest.Items {
			s.Longest = append(s.Longest, h.Longest.Items[i].spec())
		}
	}
	return s
}

func (q *quotaDoc) spec() providers.QuotaSpec {
	s := providers.QuotaSpec{
		Remaining: textOf(q.Remaining), RemainingPrefix: textOf(q.RemainingPrefix), Reset: textOf(q.Reset),
		Format: textOf(q.Format), Limit: textOf(q.Limit), Header: textOf(q.Header), Policy: textOf(q.Policy),
	}
	if q.ResetIn != nil {
		s.ResetIn = providers.Duration(q.ResetIn.V)
	}
	return s
}

func (r *ruleDoc) spec() providers.RuleSpec {
	s := providers.RuleSpec{
		Name: textOf(r.Name), Statuses: statusesOf(r.Statuses), BodyContains: textsOf(r.BodyContains),
		When: textOf(r.When), Action: textOf(r.Action), Reason: textOf(r.Reason),
		NotExecuted: r.NotExecuted != nil && r.NotExecuted.V,
	}
	if d := r.Delay; d != nil {
		s.Delay = &providers.DelaySpec{
			Header: textOf(d.Header), Format: textOf(d.Format), Body: textOf(d.Body), Unit: textOf(d.Unit), Expr: textOf(d.Expr),
		}
	}
	return s
}

// spec returns the entry doc describes under name, over base (the entry it
// extends; the zero spec for a new entry). A derived entry (one that
// extends an entry of another name) does not inherit base's hosts: a host
// belongs to one provider. Every other field doc sets replaces what it
// inherits, except rules, which merge by name: a rule named like an
// inherited one replaces it where it stands, and the other rules come
// first, in file order, before the inherited ones. ruleNodes[i] is the
// node of the merged spec's rule i, or nil for an inherited one.
func (d *providerDoc) spec(name string, base providers.EntrySpec, derived bool) (spec providers.EntrySpec, ruleNodes []*yaml.Node) {
	spec = base
	spec.Name = name
	if derived {
		spec.Hosts = nil
	}
	if d.Title != nil {
		spec.Title = d.Title.V
	}
	if d.Docs != nil {
		spec.Docs = textsOf(d.Docs)
	}
	if d.Notes != nil {
		spec.Notes = textsOf(d.Notes)
	}
	if d.Hosts != nil {
		spec.Hosts = textsOf(d.Hosts)
	}
	if d.RetryStatuses != nil {
		spec.RetryStatuses = statusesOf(d.RetryStatuses)
	}
	if d.Hints != nil {
		spec.Hints = make([]providers.HintSpec, len(d.Hints.Items))
		for i := range d.Hints.Items {
			spec.Hints[i] = d.Hints.Items[i].spec()
		}
	}
	if d.ShouldRetry != nil {
		spec.ShouldRetry = textsOf(d.ShouldRetry)
	}
	if d.NotExecuted != nil {
		spec.NotExecuted = textsOf(d.NotExecuted)
	}
	if d.Quotas != nil {
		spec.Quotas = make([]providers.QuotaSpec, len(d.Quotas.Items))
		for i := range d.Quotas.Items {
			spec.Quotas[i] = d.Quotas.Items[i].spec()
		}
	}
	if s := d.Scope; s != nil {
		spec.Scope = &providers.ScopeSpec{Header: textOf(s.Header), Global: textOf(s.Global)}
	}
	ruleNodes = make([]*yaml.Node, len(base.Rules))
	if d.Rules == nil {
		return spec, ruleNodes
	}
	inherited := make(map[string]int, len(base.Rules))
	for i, r := range base.Rules {
		inherited[r.Name] = i
	}
	merged := slices.Clone(base.Rules)
	var fresh, dups []providers.RuleSpec
	var freshNodes, dupNodes []*yaml.Node
	written := make(map[string]bool, len(d.Rules.Items))
	for i := range d.Rules.Items {
		r := &d.Rules.Items[i]
		rs := r.spec()
		switch j, ok := inherited[rs.Name]; {
		case written[rs.Name]:
			// A second rule of the name: last, so that Compile reports
			// the duplicate at it.
			dups, dupNodes = append(dups, rs), append(dupNodes, r.node)
		case ok:
			merged[j], ruleNodes[j] = rs, r.node
		default:
			fresh, freshNodes = append(fresh, rs), append(freshNodes, r.node)
		}
		written[rs.Name] = true
	}
	spec.Rules = slices.Concat(fresh, merged, dups)
	return spec, slices.Concat(freshNodes, ruleNodes, dupNodes)
}

// scope is what a policy's provider names resolve through: the file's
// catalog, or a tenant's.
type scope struct {
	cat *providers.Catalog
	// hostMap is cat's hosts with the file's host_providers on top: the
	// host map of a policy that sets no host_providers of its own.
	hostMap providers.HostMap
	// broken holds the names of entries that failed (their problems are
	// reported): a policy naming one is not valid, but is not reported
	// again as naming an unknown provider.
	broken map[string]bool
}

// names lists the scope's providers for a message.
func (sc *scope) names() string { return strings.Join(sc.cat.Names(), ", ") }

// providerLayer resolves one providers mapping over the catalog below it.
type providerLayer struct {
	l     *loader
	below *providers.Catalog
	// belowBroken are the names of the broken entries below (the file's,
	// for a tenant's layer): extending one is not reported again.
	belowBroken map[string]bool
	docs        *providerDocs
	path        string // "providers", or "tenants[3].providers"
	owner       string // ", tenant team-a" for a tenant's layer, else ""
	byName      map[string]*layerEntry
	stack       []string // names being resolved, for cycles
	broken      map[string]bool
}

// layerEntry is one entry of a layer while it resolves.
type layerEntry struct {
	e        *entry[providerDoc]
	state    int8 // 0 unvisited, 1 resolving, 2 done
	compiled *providers.Entry
	hosts    []hostAt // the hosts it writes, for clashes within the layer
}

// hostAt is a host an entry lists, normalised, and where.
type hostAt struct {
	host string
	node *yaml.Node
}

// readProviders resolves a providers mapping (the file's, over the built-in
// catalog, or a tenant's, over the file's, whose broken entries are
// belowBroken) and returns the scope of the
// policies it applies to: below with every valid entry on top, the host
// map built with the file's host_providers (overrides, nil while the
// file's own providers are read), and the names of the broken entries.
func (l *loader) readProviders(docs *providerDocs, below *providers.Catalog, belowBroken map[string]bool, path, owner string, overrides map[string]string) *scope {
	sc := &scope{cat: below}
	if docs != nil && len(docs.Entries) > 0 {
		pl := &providerLayer{l: l, below: below, belowBroken: belowBroken, docs: docs, path: path, owner: owner, byName: make(map[string]*layerEntry, len(docs.Entries)), broken: map[string]bool{}}
		var order []*layerEntry
		for i := range docs.Entries {
			le := &layerEntry{e: &docs.Entries[i]}
			pl.byName[le.e.Key.Value] = le
			order = append(order, le)
		}
		var entries []*providers.Entry
		for _, le := range order {
			if e := pl.resolve(le.e.Key.Value); e != nil {
				entries = append(entries, e)
			}
		}
		pl.checkHosts(order)
		sc.cat, sc.broken = below.With(entries...), pl.broken
	}
	hm, err := sc.cat.HostMap(overrides)
	if err != nil { // the overrides were checked against the file's catalog, below sc.cat
		l.addf(nil, path, "%v", err)
	}
	sc.hostMap = hm
	return sc
}

// resolve compiles the entry of the layer named name (once), resolving
// what it extends first. It returns nil for an entry with a problem
// (reported), and marks it broken.
func (pl *providerLayer) resolve(name string) *providers.Entry {
	le := pl.byName[name]
	switch le.state {
	case 2:
		return le.compiled
	case 1:
		chain := append(slices.Clone(pl.stack[slices.Index(pl.stack, name):]), name)
		pl.l.addf(le.e.V.Extends.node, join(join(pl.path, name), "extends"), "extends cycle: %s", strings.Join(chain, " -> "))
		pl.broken[name] = true
		return nil
	}
	le.state = 1
	pl.stack = append(pl.stack, name)
	le.compiled = pl.compile(name, le)
	pl.stack = pl.stack[:len(pl.stack)-1]
	le.state = 2
	if le.compiled == nil {
		pl.broken[name] = true
	}
	return le.compiled
}

// compile checks the entry's name and extends, merges it over what it
// extends and compiles it, reporting every problem.
func (pl *providerLayer) compile(name string, le *layerEntry) *providers.Entry {
	l, key, doc := pl.l, le.e.Key, &le.e.V
	path := join(pl.path, name)
	if name == "none" {
		l.addf(key, path, `"none" is reserved: it reads no hints; choose another name`)
		return nil
	}
	if !le.e.OK {
		return nil
	}
	base, derived, ok := pl.base(name, path, key, doc)
	if !ok || doc.bad {
		return nil // reported; an entry that did not decode is not compiled, so every index below is the file's
	}
	spec, ruleNodes := doc.spec(name, base, derived)
	le.hosts = writtenHosts(doc)
	origin := fmt.Sprintf("%s:%d%s", l.file, key.Line, pl.owner)
	if doc.Extends != nil {
		origin += ", extends " + doc.Extends.V
	}
	e, errs := l.compiler.Compile(spec, origin)
	for _, se := range errs {
		n, p := pl.place(path, key, doc, ruleNodes, se.Path)
		line, col := 0, 0
		if n != nil {
			line, col = n.Line, n.Column
			if se.Line > 0 && n.Kind == yaml.ScalarNode {
				line, col, _ = l.src.textPosition(n, se.Line, se.Column)
			}
		}
		l.problems = append(l.problems, &Problem{File: l.file, Line: line, Column: col, Path: p, Message: se.Msg})
	}
	return e
}

// base returns the spec the entry named name starts from: nothing for a
// new entry, else the entry its extends names, from this layer (another
// name) or from the catalog below. derived reports an entry extending one
// of another name. It reports a new entry whose name is taken below, and
// an extends that names nothing, none, or a broken entry (silently).
func (pl *providerLayer) base(name, path string, key *yaml.Node, doc *providerDoc) (spec providers.EntrySpec, derived, ok bool) {
	l := pl.l
	if doc.Extends == nil {
		if doc.key("extends") != nil { // not a name: reported
			return spec, false, false
		}
		if e, taken := pl.below.Lookup(name); taken {
			l.addf(key, path, "provider %q is %s; to change it write extends: %s, or choose another name", name, describeOrigin(e), name)
			return spec, false, false
		}
		return spec, false, true
	}
	target, ext := doc.Extends.V, doc.Extends.node
	switch {
	case target == "none":
		l.addf(ext, join(path, "extends"), `"none" reads no hints and cannot be extended`)
		return spec, false, false
	case target != name && pl.byName[target] != nil:
		e := pl.resolve(target)
		if e == nil {
			return spec, false, false // reported at target
		}
		return e.Spec(), true, true
	}
	e, found := pl.below.Lookup(target)
	if !found && pl.belowBroken[target] {
		return spec, false, false // reported where it is defined
	}
	if !found {
		known := pl.below.Names()
		for n := range pl.byName {
			if n != name {
				known = append(known, n)
			}
		}
		for n := range pl.belowBroken {
			known = append(known, n)
		}
		slices.Sort(known)
		known = slices.Compact(known)
		if s := suggest(target, known); s != "" {
			l.addf(ext, join(path, "extends"), "no provider named %s to extend; did you mean %s?", describe(target), s)
		} else {
			l.addf(ext, join(path, "extends"), "no provider named %s to extend (known: %s)", describe(target), strings.Join(known, ", "))
		}
		return spec, false, false
	}
	return e.Spec(), target != name, true
}

// describeOrigin says where an entry of a lower layer comes from.
func describeOrigin(e *providers.Entry) string {
	if o := e.Origin(); o != "" {
		where, _, _ := strings.Cut(o, ", ")
		return "already defined at " + where
	}
	return "built in"
}

// writtenHosts returns the hosts an entry writes, normalised as the
// catalog matches them.
func writtenHosts(doc *providerDoc) []hostAt {
	if doc.Hosts == nil {
		return nil
	}
	out := make([]hostAt, 0, len(doc.Hosts.Items))
	for _, h := range doc.Hosts.Items {
		n := strings.TrimSuffix(strings.ToLower(h.V), ".")
		n = strings.TrimSuffix(strings.TrimPrefix(n, "["), "]")
		out = append(out, hostAt{n, h.node})
	}
	return out
}

// checkHosts reports a host written by two entries of the layer, at the
// second. A host an entry of a lower layer serves may be listed: the
// upper layer's entry wins it.
func (pl *providerLayer) checkHosts(order []*layerEntry) {
	owner := map[string]string{}
	for _, le := range order {
		name := le.e.Key.Value
		for i, h := range le.hosts {
			if first, taken := owner[h.host]; taken && first != name {
				pl.l.addf(h.node, index(join(join(pl.path, name), "hosts"), i), "host %s is also listed by provider %q; a host maps to one provider", describe(h.host), first)
				pl.broken[name] = true
				continue
			}
			owner[h.host] = name
		}
	}
}

// place returns the node a SpecError's field path (from the merged entry:
// "rules[2].when") designates in the file, and the problem's path from the
// file's root (with the file's rule index). A path that goes below what
// the file writes stops at the deepest node written (a missing key is
// reported at its mapping).
func (pl *providerLayer) place(path string, key *yaml.Node, doc *providerDoc, ruleNodes []*yaml.Node, fieldPath string) (*yaml.Node, string) {
	segs := splitFieldPath(fieldPath)
	if len(segs) == 0 || segs[0].key == "name" {
		return key, path
	}
	cur, out := doc.node, path
	for i, s := range segs {
		if i == 0 && s.key == "rules" && s.index >= 0 && doc.Rules != nil {
			// rules[i] of the merged entry: find the rule the file wrote.
			if s.index >= len(ruleNodes) || ruleNodes[s.index] == nil {
				return doc.Extends.node, out + ".rules" // an inherited rule, which compiled before
			}
			cur = ruleNodes[s.index]
			out += ".rules" + indexSeg(doc.Rules.itemIndex(cur))
			continue
		}
		if s.key != "" {
			out += keySeg(s.key)
			next := valueNode(cur, s.key)
			if next == nil {
				if i == 0 && doc.Extends != nil {
					return doc.Extends.node, pathRest(out, segs[i+1:])
				}
				return cur, pathRest(out, segs[i+1:])
			}
			cur = next
		}
		if s.index >= 0 {
			out += indexSeg(s.index)
			if cur.Kind != yaml.SequenceNode || s.index >= len(cur.Content) {
				return cur, pathRest(out, segs[i+1:])
			}
			cur = cur.Content[s.index]
		}
	}
	return cur, out
}

// pathRest appends the remaining segments to a path.
func pathRest(path string, segs []pathSeg) string {
	for _, s := range segs {
		if s.key != "" {
			path += keySeg(s.key)
		}
		if s.index >= 0 {
			path += indexSeg(s.index)
		}
	}
	return path
}

// pathSeg is one segment of a SpecError path: a key, with an index when
// the key is followed by one ("hints[0]"); index is -1 without.
type pathSeg struct {
	key   string
	index int
}

// splitFieldPath splits "rules[2].delay.expr" into segments.
func splitFieldPath(p string) []pathSeg {
	var out []pathSeg
	for part := range strings.SplitSeq(p, ".") {
		key, rest, _ := strings.Cut(part, "[")
		seg := pathSeg{key: key, index: -1}
		if rest != "" {
			if i, err := strconv.Atoi(strings.TrimSuffix(rest, "]")); err == nil {
				seg.index = i
			}
		}
		out = append(out, seg)
	}
	return out
}

// checkHostNames reports the values of a host_providers mapping that name
// no provider of sc, at the value; path is the mapping's path. It returns
// whether every value names one (a broken entry's name counts, without a
// problem, but still makes the result false).
func (l *loader) checkHostNames(h *hostProviders, sc *scope, path string) bool {
	if h == nil {
		return true
	}
	ok := true
	for _, e := range h.Entries {
		if !e.OK {
			continue
		}
		name := e.V.V
		if _, valid := h.hosts[e.Key.Value]; !valid {
			continue // a bad pattern: reported
		}
		switch {
		case sc.cat.Has(name):
		case sc.broken[name]:
			ok = false
		default:
			l.addf(e.V.node, path+keySeg(e.Key.Value), "unknown provider %s (known: %s)", describe(name), sc.names())
			ok = false
		}
	}
	return ok
}
