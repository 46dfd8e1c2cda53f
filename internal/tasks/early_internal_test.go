package tasks

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// TestEarlyDispatchHasAShortTimeout: a run of a dispatch job that starts
// before the due time its job carries has earlyTimeout (a broker killed
// during it strands the job for seconds); a run at or after it, and a job
// of an older broker without a due time, have --tasks-rescue-after.
func TestEarlyDispatchHasAShortTimeout(t *testing.T) {
	w := &worker{s: &RiverStore{rescueAfter: 10 * time.Minute}}
	at := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	job := func(due time.Time, attempted *time.Time) *river.Job[dispatchArgs] {
		return &river.Job[dispatchArgs]{JobRow: &rivertype.JobRow{AttemptedAt: attempted}, Args: dispatchArgs{Tenant: "a", TaskID: "t", Due: nano(due)}}
	}
	for _, c := range []struct {
		name      string
		due       time.Time
		attempted *time.Time
		want      time.Duration
	}{
		{"early", at.Add(3 * time.Second), &at, earlyTimeout},
		{"at its time", at, &at, 10 * time.Minute},
		{"late", at.Add(-time.Second), &at, 10 * time.Minute},
		{"no due time", time.Time{}, &at, 10 * time.Minute},
		{"not attempted", at.Add(time.Second), nil, 10 * time.Minute},
	} {
		if got := w.Timeout(job(c.due, c.attempted)); got != c.want {
			t.Errorf("%s: timeout %s, want %s", c.name, got, c.want)
		}
	}
}
