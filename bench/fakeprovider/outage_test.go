package fakeprovider

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestOutagePhases(t *testing.T) {
	c := &clock{t: t0}
	o, err := NewOutage(OutageConfig{DownFrom: t0.Add(time.Second), DownUntil: t0.Add(3 * time.Second), Now: c.Now, MaxArrivals: 4})
	if err != nil {
		t.Fatal(err)
	}
	serve := func(at time.Duration) *http.Response {
		c.Set(t0.Add(at))
		rec := httptest.NewRecorder()
		o.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
		return rec.Result()
	}
	if r := serve(999 * time.Millisecond); r.StatusCode != 200 {
		t.Fatalf("before: %d", r.StatusCode)
	}
	if _, ok := o.Stats().RecoveryDelay(); ok {
		t.Fatal("recovery delay before any call after the outage")
	}
	for _, at := range []time.Duration{time.Second, 2 * time.Second, 3*time.Second - 1} {
		r := serve(at)
		if r.StatusCode != 503 {
			t.Fatalf("during, at %v: %d", at, r.StatusCode)
		}
		for name := range r.Header {
			if name != "Content-Type" {
				t.Errorf("the outage gives no hint, but its 503 carries %s", name)
			}
		}
		if b, _ := io.ReadAll(r.Body); len(b) == 0 {
			t.Error("503 without a body")
		}
	}
	if r := serve(3*time.Second + 250*time.Millisecond); r.StatusCode != 200 {
		t.Fatalf("after: %d", r.StatusCode)
	}
	serve(4 * time.Second)
	s := o.Stats()
	if s.Before != 1 || s.During != 3 || s.After != 2 {
		t.Fatalf("phases %+v", s)
	}
	if d, ok := s.RecoveryDelay(); !ok || d != 250*time.Millisecond {
		t.Fatalf("recovery delay %v %v", d, ok)
	}
	if len(s.Arrivals) != 4 || !s.Arrivals[3].Equal(t0.Add(3*time.Second-1)) {
		t.Fatalf("arrivals (bounded to 4): %v", s.Arrivals)
	}
}

func TestOutageConfigChecks(t *testing.T) {
	for _, cfg := range []OutageConfig{{}, {DownFrom: t0}, {DownFrom: t0, DownUntil: t0}} {
		if _, err := NewOutage(cfg); err == nil {
			t.Errorf("NewOutage(%+v) accepted", cfg)
		}
	}
}

func TestOutageServerOnLoopback(t *testing.T) {
	now := time.Now()
	s, err := StartOutage(OutageConfig{DownFrom: now.Add(-time.Hour), DownUntil: now.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	r, err := client.Get(s.URL() + "/x")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, r.Body)
	_ = r.Body.Close()
	if r.StatusCode != 503 || s.Stats().During != 1 {
		t.Fatalf("status %d, stats %+v", r.StatusCode, s.Stats())
	}
}
