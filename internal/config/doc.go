// Package config loads the broker's policy configuration: a YAML file of
// tenants, their credentials (API-key hashes and mTLS identities) and their
// retry policies, passed with --config.
//
// Load and Parse read a file into a Directory, an immutable snapshot with
// lookups by tenant id, API-key hash and mTLS identity. Every problem in a
// file is reported at once, each with its file, line, column and field path
// (see Error and Problem). Holder serves the current Directory, swaps in a
// new one on Reload, keeps the last good one when a reload fails, and
// counts reloads in Prometheus metrics; Holder.Watch reloads on SIGHUP and
// when the file changes. Check backs "broker config check FILE".
//
// The file format is documented in docs/policy.md. In short:
//
//	version: 1
//	providers:                                         # over the built-in catalog
//	  corp-api: {hosts: [api.corp.example], rules: [...]}
//	  aws: {extends: aws, rules: [...]}
//	host_providers: {api.github.example.com: github}   # over the catalog's hosts
//	policies:                                          # shared policies
//	  standard: {max_retries: 3, backoff: {base: 1s}}
//	tenants:
//	  - id: team-a
//	    api_key_sha256: ["<64 hex digits>"]            # printf %s "$KEY" | sha256sum
//	    mtls_identities: ["spiffe://corp/ns/a/sa/x", "CN=team-a"]
//	    providers: {corp-batch: {extends: corp-api}}  # this tenant's only
//	    stream: {max_concurrent: 32}                   # streams across its policies, per replica
//	    credentials:                                   # broker-held; secrets from files or the environment only
//	      gh: {kind: header, name: Authorization, prefix: "Bearer ", value_file: /run/secrets/gh}
//	    policies:
//	      default: standard                            # share a policy by name
//	      bulk: {extends: standard, max_retries: 5}    # or define one
//	      api: {extends: standard, credential: gh}     # the broker applies gh on every attempt
//
// Credentials (credentials.go) are built with credential.New at load, which
// reads every secret once, and bound to the policies of their tenant that
// name them; a reload keeps those whose settings did not change.
//
//	admin:
//	  token_sha256: ["<64 hex digits>"]              # the admin view's tokens, hashed
//
// # Decoding
//
// A file is parsed once by yaml.v3 into a node tree, then decoded into Go
// structs that mirror it: fileDoc, tenantDoc, policyDoc and the policy's
// sections (backoffDoc, budgetDoc, ...), whose yaml tags are the keys of
// the file. Values are positioned scalars (scalar[T, K]: a duration, a
// size, a bounded integer, a strict boolean, a CIDR, a header name, ...)
// whose UnmarshalYAML(*yaml.Node) parses the value and keeps its node, so
// its line and column; lists and mappings keep theirs too. A problem found
// while decoding is returned, with its node and its path below the value,
// instead of stopping the decoding, so every problem of the file is
// reported. Unknown keys (with the closest known key as a suggestion),
// duplicate keys, YAML aliases and merge keys are refused where they are
// written. See decode.go for how a section is declared, and why yaml.v3's
// own KnownFields is not what refuses unknown keys.
//
// A policy's fields are pointers; a nil field is not set, and the policy
// keeps what it inherits: the shared policy it extends, else the standard
// policy (tenant.DefaultPolicy). Loading applies each decoded policy over
// what it inherits, checks what depends on both (a budget that would be
// unlimited, pacing without a rate, breaker.max_open against open_for),
// then validates the result with engine.Policy.Validate and places each of
// the engine's field errors at the key that set the field, or, for a value
// inherited through extends, at the key that contradicts it or at the
// extends value. Values are parsed once, at load: allow_destinations
// becomes []netip.Prefix, header names are checked, custom readers are
// built.
//
// # Providers
//
// The top-level providers and each tenant's are provider catalog entries
// (providers.go): decoded like the rest, then merged over what they extend
// and compiled by providers.Compiler, whose SpecErrors are placed on the
// file (a CEL expression's line and column mapped onto the YAML scalar by
// source.textPosition, position.go). They build layered catalogs (the
// built-in one, the file's on top, a tenant's on top of that); every
// policy gets its tenant's as engine.Policy.Catalog, and its host map from
// it. A tenant never sees another tenant's entries.
//
// Tenants that reference the same shared policies share the *tenant.Policy
// values and the policy map, so a file with many tenants stays small in
// memory, unless they define providers (their shared policies are then
// copies that resolve names through their own catalog); nothing reachable
// from a Directory may be modified.
package config
