package credential

import "fmt"

// newOAuth2 is not built yet.
func newOAuth2(spec Spec, _ Deps) (Credential, error) {
	return nil, fmt.Errorf("credential %s: kind %s is not built yet", spec.Name, spec.Kind)
}
