package fakeprovider

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/providers"
)

// clock is a settable fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newProvider(t *testing.T, cfg Config) (*Provider, *clock) {
	t.Helper()
	c := &clock{t: t0}
	cfg.Now = c.Now
	if cfg.Start.IsZero() {
		cfg.Start = t0
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p, c
}

func call(p *Provider) *http.Response {
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/repos/x", nil))
	return rec.Result()
}

func TestGitHubQuotaAndHeaders(t *testing.T) {
	p, c := newProvider(t, Config{Style: GitHub, Quota: 3, Window: 2 * time.Second, Windows: 2})
	c.Set(t0.Add(100 * time.Millisecond))
	reset := strconv.FormatInt(t0.Add(2*time.Second).Unix(), 10)
	for i, want := range []string{"2", "1", "0"} {
		r := call(p)
		if r.StatusCode != 200 {
			t.Fatalf("call %d: status %d", i, r.StatusCode)
		}
		if got := r.Header.Get("X-Ratelimit-Remaining"); got != want {
			t.Errorf("call %d: remaining %q, want %q", i, got, want)
		}
		if got := r.Header.Get("X-Ratelimit-Reset"); got != reset {
			t.Errorf("call %d: reset %q, want %q", i, got, reset)
		}
		if r.Header.Get("Retry-After") != "" {
			t.Errorf("call %d: GitHub style sends no Retry-After", i)
		}
	}
	r := call(p)
	if r.StatusCode != 429 || r.Header.Get("X-Ratelimit-Remaining") != "0" || r.Header.Get("X-Ratelimit-Reset") != reset {
		t.Fatalf("refusal: %d %v", r.StatusCode, r.Header)
	}
	body, _ := io.ReadAll(r.Body)
	if len(body) == 0 {
		t.Error("refusal has no body")
	}
	// The boundary is exact: the first call at the reset is in window 1.
	c.Set(t0.Add(2 * time.Second))
	if r := call(p); r.StatusCode != 200 || r.Header.Get("X-Ratelimit-Remaining") != "2" {
		t.Fatalf("at the reset: %d remaining %s", r.StatusCode, r.Header.Get("X-Ratelimit-Remaining"))
	}
	s := p.Stats()
	if s.Windows[0].Accepted != 3 || s.Windows[0].Refused != 1 || s.Windows[1].Accepted != 1 {
		t.Errorf("windows: %+v", s.Windows)
	}
	if s.Accepted != 4 || s.Refused != 1 || s.Early != 1 {
		// The refused call arrived after "remaining 0, reset T": early.
		t.Errorf("totals: accepted %d refused %d early %d", s.Accepted, s.Refused, s.Early)
	}
	if s.Windows[0].FirstRefusal != 100*time.Millisecond || s.Windows[1].FirstRefusal != -1 {
		t.Errorf("first refusal offsets: %v %v", s.Windows[0].FirstRefusal, s.Windows[1].FirstRefusal)
	}
	if got := s.Goodput(); got != 4.0/6 {
		t.Errorf("goodput %v", got)
	}
	if got := s.RefusedPerWindow(); got != 0.5 {
		t.Errorf("refused per window %v", got)
	}
}

func TestGitHub403(t *testing.T) {
	p, c := newProvider(t, Config{Style: GitHub, Quota: 1, Window: time.Second, RefusalStatus: 403})
	c.Set(t0)
	call(p)
	if r := call(p); r.StatusCode != 403 || r.Header.Get("X-Ratelimit-Remaining") != "0" {
		t.Fatalf("refusal %d %v", r.StatusCode, r.Header)
	}
}

func TestAzureRetryAfterMsIsExactAndRoundedUp(t *testing.T) {
	p, c := newProvider(t, Config{Style: Azure, Quota: 1, Window: 1500 * time.Millisecond, Windows: 2, KeepArrivals: true})
	c.Set(t0)
	r := call(p)
	if r.StatusCode != 200 {
		t.Fatalf("accepted: %d %v", r.StatusCode, r.Header)
	}
	for name := range r.Header {
		if name != "Content-Type" {
			t.Errorf("accepted call carries %s: the Azure style announces nothing on accepted calls", name)
		}
	}
	if s := p.Stats(); s.Early != 0 {
		t.Fatalf("Azure reports no remaining count: an accepted call announces nothing (early %d)", s.Early)
	}
	c.Set(t0.Add(1000*time.Millisecond + 300*time.Microsecond))
	r = call(p)
	// 499.7 ms remain: announced as 500 ms, never shorter than the window.
	if r.StatusCode != 429 || r.Header.Get("X-Ms-Retry-After-Ms") != "500" {
		t.Fatalf("refusal: %d %q", r.StatusCode, r.Header.Get("X-Ms-Retry-After-Ms"))
	}
	// Announced T = arrival + 500 ms = t0+1500.3ms: a call at the window
	// boundary is accepted but early; one at T is on time.
	c.Set(t0.Add(1500 * time.Millisecond))
	if r := call(p); r.StatusCode != 200 {
		t.Fatalf("new window: %d", r.StatusCode)
	}
	s := p.Stats()
	if s.Early != 1 || !s.Arrivals[2].Early || !s.Arrivals[2].Accepted {
		t.Fatalf("early: %d %+v", s.Early, s.Arrivals)
	}
}

func TestRetryAfterStyle(t *testing.T) {
	p, c := newProvider(t, Config{Style: RetryAfter, Quota: 1, Window: 2 * time.Second, Windows: 2, KeepArrivals: true})
	c.Set(t0.Add(200 * time.Millisecond))
	r := call(p)
	if r.StatusCode != 200 {
		t.Fatalf("accepted: %d", r.StatusCode)
	}
	for name := range r.Header {
		if name != "Content-Type" {
			t.Errorf("accepted call carries %s: the style announces nothing on accepted calls", name)
		}
	}
	c.Set(t0.Add(1200 * time.Millisecond))
	r = call(p)
	// 0.8 s to the boundary: Retry-After 1, so T = t0 + 2.2 s.
	if r.StatusCode != 429 || r.Header.Get("Retry-After") != "1" || len(r.Header) != 2 {
		t.Fatalf("refusal: %d %v", r.StatusCode, r.Header)
	}
	c.Set(t0.Add(2100 * time.Millisecond)) // new window, before T: accepted but early
	if r := call(p); r.StatusCode != 200 {
		t.Fatalf("new window: %d", r.StatusCode)
	}
	c.Set(t0.Add(2200 * time.Millisecond)) // at T: on time (and refused: quota 1)
	if r := call(p); r.StatusCode != 429 || r.Header.Get("Retry-After") != "2" {
		t.Fatalf("second refusal: %d %v", r.StatusCode, r.Header)
	}
	s := p.Stats()
	if s.Early != 1 || !s.Arrivals[2].Early || s.Arrivals[3].Early {
		t.Fatalf("early: %d %+v", s.Early, s.Arrivals)
	}
	if s.Windows[0].Refused != 1 || s.Windows[1].Refused != 1 || s.Windows[1].Early != 1 {
		t.Fatalf("windows %+v", s.Windows)
	}
}

func TestStatsFrom(t *testing.T) {
	p, c := newProvider(t, Config{Style: Azure, Quota: 2, Window: time.Second, Windows: 3})
	for w, calls := range []int{5, 3, 2} {
		c.Set(t0.Add(time.Duration(w)*time.Second + 10*time.Millisecond))
		for range calls {
			call(p)
		}
	}
	c.Set(t0.Add(3 * time.Second))
	call(p) // outside
	s := p.Stats()
	later := s.From(1)
	if len(later.Windows) != 2 || later.Windows[0].Index != 1 || !later.Start.Equal(t0.Add(time.Second)) {
		t.Fatalf("From(1) windows %+v", later.Windows)
	}
	if later.Accepted != 4 || later.Refused != 1 || later.Outside != 0 || later.Early != s.Windows[1].Early+s.Windows[2].Early {
		t.Fatalf("From(1) %+v", later)
	}
	if got := later.Goodput(); got != 1 {
		t.Errorf("From(1) goodput %v", got)
	}
	if got := later.RefusedPerWindow(); got != 0.5 {
		t.Errorf("From(1) refused per window %v", got)
	}
	if got := later.MaxRefusedInAWindow(); got != 1 {
		t.Errorf("From(1) max refused %v", got)
	}
	if s.MaxRefusedInAWindow() != 3 || s.From(0).Refused != s.Refused {
		t.Errorf("whole run: %+v", s)
	}
	if none := s.From(3); len(none.Windows) != 0 || none.Goodput() != 0 || none.RefusedPerWindow() != 0 {
		t.Errorf("From(3) %+v", none)
	}
}

func TestJiraHeaders(t *testing.T) {
	for _, withRA := range []bool{false, true} {
		p, c := newProvider(t, Config{Style: Jira, Quota: 1, Window: 2 * time.Second, JiraRetryAfter: withRA})
		c.Set(t0.Add(500 * time.Millisecond))
		r := call(p)
		if r.StatusCode != 200 || r.Header.Get("X-Ratelimit-Remaining") != "0" || r.Header.Get("X-Ratelimit-Reset") != "2026-03-01T12:00:02Z" {
			t.Fatalf("accepted: %d %v", r.StatusCode, r.Header)
		}
		r = call(p)
		if r.StatusCode != 429 || r.Header.Get("X-Ratelimit-Reset") != "2026-03-01T12:00:02Z" {
			t.Fatalf("refused: %d %v", r.StatusCode, r.Header)
		}
		want := ""
		if withRA {
			want = "2" // 1.5 s rounded up
		}
		if got := r.Header.Get("Retry-After"); got != want {
			t.Errorf("Retry-After %q, want %q", got, want)
		}
	}
}

func TestEarlySendsFollowTheLatestAnnouncement(t *testing.T) {
	p, c := newProvider(t, Config{Style: GitHub, Quota: 2, Window: time.Second, Windows: 3})
	c.Set(t0)
	call(p) // remaining 1: no announcement
	call(p) // remaining 0: announces t0+1s
	if s := p.Stats(); s.Early != 0 {
		t.Fatalf("early before any announcement: %d", s.Early)
	}
	c.Set(t0.Add(999 * time.Millisecond))
	call(p) // refused, early
	c.Set(t0.Add(time.Second))
	call(p) // on time
	call(p) // on time, remaining 0: announces t0+2s
	c.Set(t0.Add(1500 * time.Millisecond))
	call(p) // early
	c.Set(t0.Add(2 * time.Second))
	call(p)
	s := p.Stats()
	if got := [3]int{s.Windows[0].Early, s.Windows[1].Early, s.Windows[2].Early}; got != [3]int{1, 1, 0} {
		t.Fatalf("early per window: %v", got)
	}
	if s.Refused != 2 || s.Accepted != 5 {
		t.Fatalf("accepted %d refused %d", s.Accepted, s.Refused)
	}
}

func TestOutsideWindowsAreCountedApart(t *testing.T) {
	p, c := newProvider(t, Config{Style: GitHub, Quota: 5, Window: time.Second, Windows: 1})
	c.Set(t0.Add(-time.Millisecond))
	call(p)
	c.Set(t0.Add(time.Second))
	call(p)
	s := p.Stats()
	if s.Outside != 2 || s.Accepted != 0 {
		t.Fatalf("outside %d accepted %d", s.Outside, s.Accepted)
	}
	// The call before Start belongs to window -1, with its own quota.
	if p.windowOf(t0.Add(-time.Millisecond)) != -1 || p.windowOf(t0.Add(-time.Second)) != -1 || p.windowOf(t0.Add(-time.Second-1)) != -2 {
		t.Fatal("windowOf before Start")
	}
}

func TestConfigChecks(t *testing.T) {
	bad := []Config{
		{Style: "gitlab", Quota: 1, Window: time.Second},
		{Style: GitHub, Quota: 0, Window: time.Second},
		{Style: GitHub, Quota: 1, Window: 1500 * time.Millisecond},
		{Style: Jira, Quota: 1, Window: time.Second, Start: t0.Add(time.Millisecond)},
		{Style: GitHub, Quota: 1, Window: time.Second, RefusalStatus: 503},
		{Style: RetryAfter, Quota: 1, Window: 0},
	}
	for _, cfg := range bad {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
	p, err := New(Config{Style: Azure, Quota: 1, Window: 1500 * time.Millisecond, Start: t0.Add(time.Millisecond)})
	if err != nil {
		t.Fatalf("azure needs no whole seconds: %v", err)
	}
	if p.Config().RefusalStatus != 429 || p.End() != t0.Add(1501*time.Millisecond) {
		t.Errorf("defaults: %+v end %v", p.Config(), p.End())
	}
	p, err = New(Config{Style: GitHub, Quota: 1, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Config().Start; st.Nanosecond() != 0 || !st.After(time.Now().Add(-time.Second)) {
		t.Errorf("default start %v", st)
	}
}

func TestServerOnLoopback(t *testing.T) {
	s, err := Start(Config{Style: GitHub, Quota: 1000, Window: time.Second, Start: time.Now().Truncate(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	client := &http.Client{Transport: &http.Transport{Proxy: nil}} // loopback, never a proxy
	defer client.CloseIdleConnections()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				r, err := client.Get(s.URL() + "/x")
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				_ = r.Body.Close()
			}
		})
	}
	wg.Wait()
	st := s.Stats()
	if st.Accepted+st.Outside != 80 || st.Refused != 0 {
		t.Fatalf("%+v", st)
	}
}

// TestBrokerReadersAgree checks that the broker's hint readers read the
// provider's announcements as the exact window boundary (and the quota on
// accepted calls), so that the benchmark measures the broker, not a
// misunderstanding of the headers.
func TestBrokerReadersAgree(t *testing.T) {
	for _, style := range Styles {
		t.Run(string(style), func(t *testing.T) {
			p, c := newProvider(t, Config{Style: style, Quota: 2, Window: 2 * time.Second})
			rd, ok := providers.Lookup(string(style))
			if !ok {
				t.Fatalf("no reader %q", style)
			}
			now := t0.Add(700 * time.Millisecond)
			c.Set(now)
			reset := t0.Add(2 * time.Second)
			r := call(p)
			got := rd.Read(&providers.Response{Status: r.StatusCode, Header: r.Header, Now: now})
			wantQuota := style == GitHub || style == Jira
			if got.HasQuota != wantQuota || got.HasHint {
				t.Fatalf("accepted: %+v", got)
			}
			if wantQuota && (got.Quota.Remaining != 1 || !got.Quota.Reset.Equal(reset)) {
				t.Fatalf("accepted quota: %+v", got.Quota)
			}
			call(p)
			r = call(p)
			got = rd.Read(&providers.Response{Status: r.StatusCode, Header: r.Header, Now: now})
			want := reset.Sub(now)
			if style == RetryAfter {
				want = 2 * time.Second // 1.3 s to the boundary, in whole seconds rounded up
			}
			if !got.HasHint || got.Hint.Delay != want {
				t.Fatalf("refusal hint %+v, want %v", got, want)
			}
		})
	}
}
