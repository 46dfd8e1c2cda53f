package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrybroker/retrybroker/internal/admin"
	"github.com/retrybroker/retrybroker/internal/engine"
	"github.com/retrybroker/retrybroker/internal/tasks"
)

// TestAdminTasksListsATenantsTasks: over a real SQLite task store (not
// started: nothing is dispatched), /admin/tasks lists a tenant's tasks
// only, by state and paged, without their requests or idempotency keys,
// and refuses a bad state, page size or token with 400.
func TestAdminTasksListsATenantsTasks(t *testing.T) {
	st, err := tasks.OpenSQLite(t.Context(), filepath.Join(t.TempDir(), "tasks.db"), nil,
		func(context.Context, string, string, []byte) (*engine.Call, error) { return nil, nil })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close(context.Background()) })
	hour := time.Now().Add(time.Hour)
	for _, nt := range []tasks.NewTask{
		{Tenant: "acme", ID: "a1", NotBefore: hour, IdempotencyKey: "key-a1", Request: []byte("secret-request-a1")},
		{Tenant: "acme", ID: "a2", NotBefore: hour, Request: []byte("r")},
		{Tenant: "acme", ID: "a3", NotBefore: hour, Request: []byte("r")},
		{Tenant: "globex", ID: "g1", NotBefore: hour, Request: []byte("r")},
	} {
		if _, _, err := st.Create(t.Context(), nt); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.Cancel(t.Context(), "acme", "a3"); err != nil {
		t.Fatal(err)
	}
	h, _ := newAdmin(t, admin.WithTasks(func() tasks.Store { return st }))
	list := func(q string) admin.TasksJSON {
		t.Helper()
		w := do(h, http.MethodGet, admin.TasksPath+"?"+q, local, "")
		if w.Code != http.StatusOK {
			t.Fatalf("?%s = %d %s", q, w.Code, w.Body.String())
		}
		if strings.Contains(w.Body.String(), "secret-request-a1") || strings.Contains(w.Body.String(), "key-a1") {
			t.Fatalf("the listing shows a request or an idempotency key: %s", w.Body.String())
		}
		var out admin.TasksJSON
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := list("tenant=acme&page_size=2")
	if len(first.Tasks) != 2 || first.Tasks[0].TaskID != "a1" || first.Tasks[1].TaskID != "a2" || first.NextPageToken == "" ||
		first.Tasks[0].State != "scheduled" || first.Tasks[0].NextRunTime == nil {
		t.Fatalf("first page: %+v", first)
	}
	second := list("tenant=acme&page_size=2&page_token=" + first.NextPageToken)
	if len(second.Tasks) != 1 || second.Tasks[0].TaskID != "a3" || second.Tasks[0].State != "cancelled" || second.NextPageToken != "" {
		t.Fatalf("second page: %+v", second)
	}
	if c := list("tenant=acme&state=cancelled"); len(c.Tasks) != 1 || c.Tasks[0].TaskID != "a3" {
		t.Fatalf("cancelled: %+v", c)
	}
	if g := list("tenant=globex"); len(g.Tasks) != 1 || g.Tasks[0].TaskID != "g1" {
		t.Fatalf("globex: %+v", g)
	}
	for q, want := range map[string]int{
		"tenant=acme&state=lost":        http.StatusBadRequest,
		"tenant=acme&page_size=0":       http.StatusBadRequest,
		"tenant=acme&page_size=1001":    http.StatusBadRequest,
		"tenant=acme&page_token=bogus!": http.StatusBadRequest,
		"tenant=nobody":                 http.StatusNotFound,
		"tenant=acme&tenant=globex":     http.StatusBadRequest,
		"tenant=acme&unknown=1":         http.StatusBadRequest,
	} {
		if w := do(h, http.MethodGet, admin.TasksPath+"?"+q, local, ""); w.Code != want {
			t.Errorf("?%s = %d, want %d: %s", q, w.Code, want, w.Body.String())
		}
	}
}
