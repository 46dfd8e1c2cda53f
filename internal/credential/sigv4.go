package credential

import "fmt"

// newSigV4 is not built yet.
func newSigV4(spec Spec, _ Deps) (Credential, error) {
	return nil, fmt.Errorf("credential %s: kind %s is not built yet", spec.Name, spec.Kind)
}
