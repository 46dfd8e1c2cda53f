package auth_test

import (
	"fmt"

	"github.com/retrybroker/retrybroker/internal/auth"
)

// The value to put under api_key_sha256 for a key; the shell equivalent is
// printf %s "$KEY" | sha256sum.
func ExampleAPIKeyHash() {
	fmt.Println(auth.APIKeyHash("team-a-secret-key"))
	// Output: 12e43dbe7404fac122a678d3347840446ef214e68de6361a1089dbacf34478d9
}

func ExamplePolicyRef() {
	for _, name := range []string{"", "bulk", "team-b/bulk"} {
		tid, policy, cross := auth.PolicyRef(name)
		fmt.Printf("%q -> tenant %q, policy %q, cross-tenant %v\n", name, tid, policy, cross)
	}
	// Output:
	// "" -> tenant "", policy "", cross-tenant false
	// "bulk" -> tenant "", policy "bulk", cross-tenant false
	// "team-b/bulk" -> tenant "team-b", policy "bulk", cross-tenant true
}
