package brokertest_test

import (
	"fmt"
	"net/http"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	"github.com/retrybroker/retrybroker/clients/go/brokertest"
)

// In a test, use brokertest.New(t, ...), which closes the broker when the
// test ends; Start is for examples and TestMain.
func ExampleStart() {
	b, err := brokertest.Start(brokertest.WithoutJitter(), brokertest.WithMaxRetries(2))
	if err != nil {
		panic(err)
	}
	defer b.Close()
	b.Script("api.example.com/",
		brokertest.Fail(broker.KindConnectionReset),
		brokertest.Status(503),
		brokertest.Status(200, "Content-Type: application/json"))

	httpClient := &http.Client{Transport: b.Client().RoundTripper()}
	resp, err := httpClient.Get("https://api.example.com/orders")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Content-Type"))
	reqs := b.Requests()
	for i := 1; i < len(reqs); i++ {
		fmt.Printf("request %d sent %s after request %d\n", i+1, reqs[i].Time.Sub(reqs[i-1].Time), i)
	}
	// Output:
	// 200 application/json
	// request 2 sent 1s after request 1
	// request 3 sent 2s after request 2
}
