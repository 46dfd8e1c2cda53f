package config

import "go.yaml.in/yaml/v3"

// adminDoc is the top-level admin section: the SHA-256 hashes of the
// tokens that open the admin view (--admin-listen) to any peer, as API
// keys are held: the file never holds a token.
type adminDoc struct {
	section
	TokenSHA256 apiKeyHashes `yaml:"token_sha256"`
}

// UnmarshalYAML decodes the admin mapping.
func (a *adminDoc) UnmarshalYAML(n *yaml.Node) error {
	return decodeStruct(n, &a.section, a, wantMapping)
}

// readAdmin records the admin token hashes of f in the directory,
// refusing a hash that is also a tenant's API key hash (one secret would
// then be both a caller's key and the admin token).
func (l *loader) readAdmin(f *fileDoc) {
	if f.Admin == nil || l.dir == nil {
		return
	}
	for i := range f.Admin.TokenSHA256.Items {
		k := &f.Admin.TokenSHA256.Items[i]
		path := index(join("admin", "token_sha256"), f.Admin.TokenSHA256.itemIndex(k.node))
		if t, dup := l.dir.byKey[k.V]; dup {
			l.addf(k.node, path, "this admin token hash is also an API key hash of tenant %s; use a token of its own", describe(t.ID))
			continue
		}
		l.dir.admin = append(l.dir.admin, k.V)
	}
}

// AdminTokenHashes returns the SHA-256 hashes of the admin tokens the
// file lists under admin.token_sha256, in a new slice (none: nil).
func (d *Directory) AdminTokenHashes() [][32]byte {
	return append([][32]byte(nil), d.admin...)
}
