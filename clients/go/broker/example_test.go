package broker_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/retrybroker/retrybroker/clients/go/broker"
	"github.com/retrybroker/retrybroker/clients/go/brokertest"
)

// The examples run against brokertest, an in-process broker with a fake
// clock and canned upstream replies. Against a real broker, replace
// b.Client() with:
//
//	client, err := broker.New("127.0.0.1:50051") // `make run`
//	defer client.Close()

func ExampleClient_Execute() {
	b, err := brokertest.Start()
	if err != nil {
		panic(err)
	}
	defer b.Close()
	// The upstream is overloaded once, then answers.
	b.Script("https://api.example.com/",
		brokertest.Status(503, "Retry-After: 2"),
		brokertest.Reply{Status: 200, Body: "hello"})
	client := b.Client()

	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/greeting", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, res, err := client.Execute(ctx, req)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, string(body), res.Outcome)
	for _, a := range res.Attempts {
		fmt.Printf("attempt %d: status %d, %s, %s, wait %s\n", a.Number, a.Status, a.Decision.Action, a.Decision.Reason, a.Decision.Delay)
	}
	// Output:
	// 200 OK hello OUTCOME_SUCCESS
	// attempt 1: status 503, retry, REASON_SERVER_HINT, wait 2s
	// attempt 2: status 200, do_not_retry, REASON_SUCCESS, wait 0s
}

func ExampleClient_RoundTripper() {
	b, err := brokertest.Start()
	if err != nil {
		panic(err)
	}
	defer b.Close()
	b.Script("api.example.com/",
		brokertest.Status(429, "Retry-After: 5"),
		brokertest.Status(200))
	client := b.Client()

	// The one-line change: every request of this http.Client goes through
	// the broker, which retries it.
	httpClient := &http.Client{Transport: client.RoundTripper()}

	resp, err := httpClient.Get("https://api.example.com/items")
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, len(b.Requests()), "upstream requests")
	// Output: 200 2 upstream requests
}

func ExampleRetry() {
	b, err := brokertest.Start()
	if err != nil {
		panic(err)
	}
	defer b.Close()
	client := b.Client()

	// Your own HTTP call; here a canned sequence stands in for it.
	replies := []int{503, 503, 200}
	call := func(ctx context.Context, attempt int) (*http.Response, error) {
		code := replies[attempt-1]
		return &http.Response{StatusCode: code, Header: http.Header{}, Body: http.NoBody}, nil
	}

	// The broker decides, Retry waits. Tests pass a fake Sleeper (here the
	// broker's fake clock); in production leave it out.
	resp, err := broker.Retry(context.Background(), client, call,
		broker.Method(http.MethodGet),
		broker.URL("https://api.example.com/items"),
		broker.WithSleeper(b.Clock()),
		broker.OnRetry(func(e broker.RetryEvent) {
			fmt.Printf("attempt %d got %d: %s\n", e.Attempt, e.Response.StatusCode, e.Decision.Reason)
		}))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("final status", resp.StatusCode)
	// Output:
	// attempt 1 got 503: REASON_BACKOFF
	// attempt 2 got 503: REASON_BACKOFF
	// final status 200
}

func ExampleClient_Classify() {
	b, err := brokertest.Start()
	if err != nil {
		panic(err)
	}
	defer b.Close()
	client := b.Client()

	// A response you got yourself.
	resp := &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"120"}}, Body: http.NoBody}
	d, err := client.Classify(context.Background(), resp, broker.AttemptNumber(1))
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(d.Action, d.Reason, d.HasHint, d.Hint)
	// Output: do_not_retry REASON_HINT_EXCEEDS_MAX_DELAY true 2m0s
}

func ExampleIsUnknownPolicy() {
	b, err := brokertest.Start()
	if err != nil {
		panic(err)
	}
	defer b.Close()
	client := b.Client()

	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com/", nil)
	_, _, err = client.Execute(context.Background(), req, broker.Policy("no-such-policy"))
	var be *broker.Error
	fmt.Println(broker.IsUnknownPolicy(err), errors.As(err, &be) && be.Code.String() == "FailedPrecondition")
	// Output: true true
}
