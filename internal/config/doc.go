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
//	host_providers: {api.github.example.com: github}   # over the built-in map
//	policies:                                          # shared policies
//	  standard: {max_retries: 3, backoff: {base: 1s}}
//	tenants:
//	  - id: team-a
//	    api_key_sha256: ["<64 hex digits>"]            # printf %s "$KEY" | sha256sum
//	    mtls_identities: ["spiffe://corp/ns/a/sa/x", "CN=team-a"]
//	    policies:
//	      default: standard                            # share a policy by name
//	      bulk: {extends: standard, max_retries: 5}    # or define one
//
// Every option defaults to the standard policy (tenant.DefaultPolicy).
// Tenants that reference the same shared policies share the *tenant.Policy
// values and the policy map, so a file with many tenants stays small in
// memory; nothing reachable from a Directory may be modified.
package config
