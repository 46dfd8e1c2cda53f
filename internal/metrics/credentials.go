package metrics

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// credentialMetrics are the broker-held credentials' collectors and the
// health detail of the credentials that could not be had.
type credentialMetrics struct {
	fetches     *prometheus.CounterVec
	expiry      *prometheus.GaugeVec
	reloads     *prometheus.CounterVec
	unavailable *prometheus.CounterVec

	mu   sync.Mutex
	down map[credKey]CredentialProblem // the credentials whose last attempt could not get them
	n    atomic.Int32                  // len(down), read without the lock on every attempt
}

type credKey struct{ tenant, credential string }

// CredentialProblem is one credential that could not be had on its last
// use: its tenant, its name, the cause (which never holds a secret) and
// since when.
type CredentialProblem struct {
	Tenant     string    `json:"tenant"`
	Credential string    `json:"credential"`
	Cause      string    `json:"cause"`
	Since      time.Time `json:"since"`
}

func newCredentialMetrics() *credentialMetrics {
	return &credentialMetrics{
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_credential_token_fetches_total",
			Help: "Token requests of oauth2_client_credentials credentials, by result (ok, refused, error, invalid).",
		}, []string{"tenant", "credential", "result"}),
		expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "retrybroker_credential_token_expiry_seconds",
			Help: "Seconds until the credential's current token expires (negative when expired).",
		}, []string{"tenant", "credential"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_credential_file_reloads_total",
			Help: "Re-reads of secret files that changed, by result (ok: the next attempt uses the new value; error: the last value read stays in use).",
		}, []string{"tenant", "credential", "result"}),
		unavailable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "retrybroker_credential_unavailable_total",
			Help: "Attempts not sent because their broker-held credential could not be had (the call ends with OUTCOME_CREDENTIALS_UNAVAILABLE).",
		}, []string{"tenant", "credential"}),
		down: map[credKey]CredentialProblem{},
	}
}

func (c *credentialMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.fetches, c.expiry, c.reloads, c.unavailable}
}

// TokenFetch counts one token request by result (credential.Observer).
func (m *Metrics) TokenFetch(tenant, credential, result string) {
	m.creds.fetches.WithLabelValues(tenant, credential, result).Inc()
}

// TokenExpiry sets the time left on the credential's token (credential.Observer).
func (m *Metrics) TokenExpiry(tenant, credential string, left time.Duration) {
	m.creds.expiry.WithLabelValues(tenant, credential).Set(left.Seconds())
}

// FileReload counts one re-read of a changed secret file (credential.Observer).
func (m *Metrics) FileReload(tenant, credential, result string) {
	m.creds.reloads.WithLabelValues(tenant, credential, result).Inc()
}

// Unavailable counts one attempt not sent for want of its credential
// (credential.Observer); CredentialUnavailable calls it.
func (m *Metrics) Unavailable(tenant, credential string) {
	m.creds.unavailable.WithLabelValues(tenant, credential).Inc()
}

// CredentialUnavailable counts an attempt not sent for want of its
// credential and keeps the cause for the health detail until the
// credential is applied again (engine.CredentialObserver).
func (m *Metrics) CredentialUnavailable(tenant, credential string, err error) {
	m.Unavailable(tenant, credential)
	c := m.creds
	k := credKey{tenant, credential}
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.down[k]
	if !ok {
		p = CredentialProblem{Tenant: tenant, Credential: credential, Since: time.Now()}
	}
	p.Cause = err.Error()
	c.down[k] = p
	c.n.Store(int32(len(c.down)))
}

// CredentialApplied clears the credential's problem, if any
// (engine.CredentialObserver). With no problem anywhere it only loads a
// counter.
func (m *Metrics) CredentialApplied(tenant, credential string) {
	c := m.creds
	if c.n.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.down, credKey{tenant, credential})
	c.n.Store(int32(len(c.down)))
}

// CredentialProblems lists the credentials whose last use could not get
// them, by tenant and name; empty when every credential works.
func (m *Metrics) CredentialProblems() []CredentialProblem {
	c := m.creds
	c.mu.Lock()
	out := make([]CredentialProblem, 0, len(c.down))
	for _, p := range c.down {
		out = append(out, p)
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Tenant != out[j].Tenant {
			return out[i].Tenant < out[j].Tenant
		}
		return out[i].Credential < out[j].Credential
	})
	return out
}
