package config_test

import (
	"errors"
	"fmt"
	"os"

	"github.com/retrybroker/retrybroker/internal/config"
)

func ExampleParse() {
	_, err := config.Parse("broker.yaml", []byte(`version: 1
tenants:
  - id: team-a
    api_key_sha256: [12e43dbe7404fac122a678d3347840446ef214e68de6361a1089dbacf34478d9]
    policies:
      default:
        max_retries: 3
        backoff: {factor: 0.5}
        max_dellay: 10s
`))
	var ce *config.Error
	if errors.As(err, &ce) {
		for _, p := range ce.Problems {
			fmt.Println(p)
		}
	}
	// Output:
	// broker.yaml:8:19: tenants[0].policies.default.backoff.factor: must be between 1 and 100, got 0.5
	// broker.yaml:9:9: tenants[0].policies.default.max_dellay: unknown field; did you mean max_delay?
}

func ExampleCheck() {
	_ = config.Check("../../testdata/config/two-tenants.yaml", os.Stdout)
	// Output: ok: 2 tenants, 5 policies
}
