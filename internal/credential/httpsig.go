package credential

import "fmt"

// newHTTPSignature is not built yet.
func newHTTPSignature(spec Spec, _ Deps) (Credential, error) {
	return nil, fmt.Errorf("credential %s: kind %s is not built yet", spec.Name, spec.Kind)
}
