package admin_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/retrybroker/retrybroker/internal/store/storetest"
)

// FuzzAdminQuery sends any query string to every admin path that reads
// one: the answer is a 200, 400 or 404 with a JSON or HTML body, never a
// panic, and never anything a peer could not have asked for.
func FuzzAdminQuery(f *testing.F) {
	for _, s := range []string{
		"tenant=acme", "tenant=acme&state=closed&page_size=2", "tenant=acme&page_token=AAAA", "tenant=%zz",
		"tenant=acme&tenant=acme", "tenant=acme&page_size=1001", "tenant=acme&host=x", "tenant=acme;x", "",
	} {
		f.Add(s)
	}
	h, st := newAdminF(f)
	storetest.FillGates(f, st, "acme", 5)
	f.Fuzz(func(t *testing.T, q string) {
		for _, p := range []string{"/admin/gates", "/admin/gate", "/admin/catalog", "/admin/tenants", "/admin/"} {
			r := httptest.NewRequest(http.MethodGet, "http://admin.test"+p, nil)
			r.URL.RawQuery = q // any bytes, as a hostile peer's request line
			r.RemoteAddr = local
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			switch w.Code {
			case http.StatusOK, http.StatusBadRequest, http.StatusNotFound:
			default:
				t.Fatalf("%s?%q = %d %s", p, q, w.Code, w.Body.String())
			}
		}
	})
}
