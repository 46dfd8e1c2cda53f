package main

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/store"
)

// AdminGatePath is the admin view of one cooldown gate, on the metrics
// listener: GET /admin/gate?tenant=T&provider=P (a named provider's gate)
// or ?tenant=T&host=H (a host's gate, for the retry-after reader), with
// &credential=FINGERPRINT for policies that gate by credential. It answers
// JSON: the gate's state, its announced quota, its learned quota and
// epoch, and whether a probe is out. It shows state, never credentials.
const AdminGatePath = "/admin/gate"

// gateView is the JSON of the admin gate view.
type gateView struct {
	Tenant           string     `json:"tenant"`
	Scope            string     `json:"scope"`
	ClosedUntil      *time.Time `json:"closed_until,omitempty"`
	BreakerOpenUntil *time.Time `json:"breaker_open_until,omitempty"`
	InFlight         int64      `json:"in_flight"`
	Quota            *quotaView `json:"announced_quota,omitempty"`
	Learning         *learnView `json:"learning,omitempty"`
	ProbeInFlight    bool       `json:"probe_in_flight"`
}

type quotaView struct {
	Remaining int64     `json:"remaining"`
	Reset     time.Time `json:"reset"`
}

type learnView struct {
	Epoch        int64  `json:"epoch"`
	Admitted     int64  `json:"admitted"`
	NotAccepted  int64  `json:"not_accepted"`
	LearnedQuota *int64 `json:"learned_quota,omitempty"`
}

// adminGateHandler serves AdminGatePath from st (stores that cannot
// inspect answer 501).
func adminGateHandler(st store.Store) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, ok := st.(store.Inspector)
		if !ok {
			http.Error(w, "this store cannot show gates", http.StatusNotImplemented)
			return
		}
		q := r.URL.Query()
		tenant, provider, host := q.Get("tenant"), q.Get("provider"), q.Get("host")
		if tenant == "" || (provider == "") == (host == "") {
			http.Error(w, "want tenant and one of provider or host", http.StatusBadRequest)
			return
		}
		key := store.GateKey{Tenant: tenant, Scope: engine.GateScope(provider, host), Credential: q.Get("credential")}
		info, err := in.InspectGate(r.Context(), key, time.Now())
		if err != nil {
			http.Error(w, "the store did not answer", http.StatusServiceUnavailable)
			return
		}
		v := gateView{Tenant: tenant, Scope: key.Scope, InFlight: info.InFlight, ProbeInFlight: info.ProbeInFlight}
		if t := info.Status.ClosedUntil; !t.IsZero() {
			v.ClosedUntil = &t
		}
		if t := info.Status.BreakerOpenUntil; !t.IsZero() {
			v.BreakerOpenUntil = &t
		}
		if info.HasQuota {
			v.Quota = &quotaView{Remaining: info.Remaining, Reset: info.Reset}
		}
		if info.Learning {
			v.Learning = &learnView{Epoch: info.Epoch, Admitted: info.Admitted, NotAccepted: info.NotAccepted}
			if info.Learned {
				l := info.LearnedQuota
				v.Learning.LearnedQuota = &l
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	})
}
