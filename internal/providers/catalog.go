package providers

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"sync"

	"go.yaml.in/yaml/v3"
)

// builtinYAML is the built-in catalog, embedded and versioned.
//
//go:embed catalog.yaml
var builtinYAML []byte

// Catalog holds compiled entries by name. It is immutable and safe for
// concurrent use; With layers entries on top of it (the built-in catalog,
// then a configuration file's providers, then a tenant's).
type Catalog struct {
	version string
	entries map[string]*Entry
	order   []*Entry  // catalog order, for documentation
	hosts   hostTable // the entries' hosts, indexed once
}

// ParseCatalogSpec decodes a catalog from YAML. Unknown fields are errors,
// reported with their line.
func ParseCatalogSpec(data []byte) (CatalogSpec, error) {
	var spec CatalogSpec
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&spec); err != nil {
		return CatalogSpec{}, fmt.Errorf("provider catalog: %w", err)
	}
	return spec, nil
}

// NewCatalog compiles every entry of spec. Errors carry the entry's index in
// their path ("providers[3].rules[0].when"); the catalog is nil when there
// is any. Names must be unique, and so must hosts across entries.
func NewCatalog(spec CatalogSpec) (*Catalog, []*SpecError) {
	c := &Catalog{version: spec.Version, entries: make(map[string]*Entry, len(spec.Providers))}
	var errs []*SpecError
	hostOwner := map[string]string{}
	for i, es := range spec.Providers {
		prefix := fmt.Sprintf("providers[%d].", i)
		e, serrs := Compile(es)
		for _, se := range serrs {
			se.Path = prefix + se.Path
			errs = append(errs, se)
		}
		if _, dup := c.entries[es.Name]; dup {
			errs = append(errs, &SpecError{Path: prefix + "name", Msg: fmt.Sprintf("provider %q is defined twice", es.Name)})
			continue
		}
		for j, h := range es.Hosts {
			rest, wild, _ := hostPattern(h)
			key := rest
			if wild {
				key = "*." + rest
			}
			if owner, taken := hostOwner[key]; taken {
				errs = append(errs, &SpecError{Path: fmt.Sprintf("%shosts[%d]", prefix, j), Msg: fmt.Sprintf("host %q already belongs to %q", h, owner)})
			}
			hostOwner[key] = es.Name
		}
		if e != nil {
			c.entries[es.Name] = e
			c.order = append(c.order, e)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	c.hosts = c.hostTable()
	return c, nil
}

// LoadCatalog parses and compiles a YAML catalog; every error is joined
// into the one returned.
func LoadCatalog(data []byte) (*Catalog, error) {
	spec, err := ParseCatalogSpec(data)
	if err != nil {
		return nil, err
	}
	c, serrs := NewCatalog(spec)
	if len(serrs) > 0 {
		errs := make([]error, len(serrs))
		for i, se := range serrs {
			errs[i] = se
		}
		return nil, fmt.Errorf("provider catalog: %w", errors.Join(errs...))
	}
	return c, nil
}

// builtin compiles the embedded catalog once, on first use.
// TestBuiltinCatalogCompiles checks that it cannot fail.
var builtin = sync.OnceValues(func() (*Catalog, error) { return LoadCatalog(builtinYAML) })

// emptyCatalog stands in if the embedded catalog failed to compile, which
// TestBuiltinCatalogCompiles rules out.
var emptyCatalog = &Catalog{entries: map[string]*Entry{}, hosts: hostTable{exact: map[string]string{}}}

// Builtin returns the built-in catalog: the 14 providers of the design,
// "retry-after" (the default) and "none".
func Builtin() *Catalog {
	c, err := builtin()
	if err != nil {
		return emptyCatalog
	}
	return c
}

// Version returns the catalog's version string.
func (c *Catalog) Version() string { return c.version }

// Lookup returns the entry with the given name (case-sensitive).
func (c *Catalog) Lookup(name string) (*Entry, bool) {
	e, ok := c.entries[name]
	return e, ok
}

// Names returns the entries' names, sorted.
func (c *Catalog) Names() []string {
	names := make([]string, 0, len(c.entries))
	for n := range c.entries {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Entries returns the entries in catalog order (layered entries after the
// ones they did not replace).
func (c *Catalog) Entries() []*Entry { return slices.Clone(c.order) }

// Has reports whether the catalog has an entry of that name.
func (c *Catalog) Has(name string) bool {
	_, ok := c.entries[name]
	return ok
}

// Len returns the number of entries.
func (c *Catalog) Len() int { return len(c.entries) }

// With returns a catalog holding c's entries and, on top, the given ones:
// an entry replaces c's entry of the same name (and takes its place at the
// end of the catalog order). Hosts follow the order too: a host listed by
// an entry of the given ones maps to it, even when one of c's entries
// lists it as well. c is not modified; With with no entries returns c.
func (c *Catalog) With(entries ...*Entry) *Catalog {
	if len(entries) == 0 {
		return c
	}
	out := &Catalog{version: c.version, entries: make(map[string]*Entry, len(c.entries)+len(entries))}
	replaced := map[string]bool{}
	for _, e := range entries {
		replaced[e.name] = true
	}
	for _, e := range c.order {
		if !replaced[e.name] {
			out.entries[e.name] = e
			out.order = append(out.order, e)
		}
	}
	for _, e := range entries {
		if _, dup := out.entries[e.name]; dup {
			// A later entry of the same name in entries wins.
			out.order = slices.DeleteFunc(out.order, func(x *Entry) bool { return x.name == e.name })
		}
		out.entries[e.name] = e
		out.order = append(out.order, e)
	}
	out.hosts = out.hostTable()
	return out
}

// HostMap returns the mapping from request hosts to this catalog's entries,
// with overrides on top (as NewHostMap does for the built-in catalog):
// override values must name entries of this catalog or "none".
func (c *Catalog) HostMap(overrides map[string]string) (HostMap, error) {
	t, err := buildTable(overrides, func(name string) bool {
		_, ok := c.entries[name]
		return ok
	})
	if err != nil {
		return HostMap{}, err
	}
	return HostMap{overrides: t, defaults: c.hosts}, nil
}

// hostTable indexes the entries' hosts; a later entry wins a host listed
// twice.
func (c *Catalog) hostTable() hostTable {
	m := map[string]string{}
	for _, e := range c.order {
		for _, h := range e.hosts {
			m[h] = e.name
		}
	}
	t, _ := buildTable(m, func(string) bool { return true })
	return t
}
