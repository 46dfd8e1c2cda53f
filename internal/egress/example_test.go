package egress_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/retrybroker/retrybroker/internal/egress"
)

func ExampleGuard_Check() {
	g, err := egress.NewGuard(egress.AllowPrefixes(netip.MustParsePrefix("127.0.0.1/32")))
	if err != nil {
		panic(err)
	}
	for _, a := range []string{"127.0.0.1:8080", "10.0.0.1:443", "[64:ff9b::a9fe:a9fe]:80", "93.184.216.34:443"} {
		err := g.Check(netip.MustParseAddrPort(a))
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			fmt.Printf("%s refused: %s\n", a, refused.Reason)
			continue
		}
		fmt.Printf("%s allowed\n", a)
	}
	// Output:
	// 127.0.0.1:8080 allowed
	// 10.0.0.1:443 refused: private range 10.0.0.0/8
	// [64:ff9b::a9fe:a9fe]:80 refused: NAT64 address 64:ff9b::/96 embeds 169.254.169.254: cloud metadata address 169.254.169.254/32
	// 93.184.216.34:443 allowed
}

func ExampleClients() {
	// One owner for the broker; one guarded client per policy's rules,
	// built once and kept with the rules.
	owner := egress.NewClients(egress.ClientConfig{})
	defer owner.CloseIdleConnections()
	devTenant, _ := egress.NewRules(egress.RulesConfig{AllowPrefixes: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	a, _ := owner.For(devTenant)
	b, _ := owner.For(devTenant)
	fmt.Println(a == b)
	// Output: true
}

func ExampleRedactURLString() {
	fmt.Println(egress.RedactURLString("https://user:pw@api.example.com/v1/items?api_key=abc&page=2#token=xyz"))
	fmt.Println(egress.RedactURLString("http://h/%zz?secret=1"))
	// Output:
	// https://REDACTED@api.example.com/v1/items?api_key=REDACTED&page=REDACTED
	// REDACTED-UNPARSABLE-URL
}
