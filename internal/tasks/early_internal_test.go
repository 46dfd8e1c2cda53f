package tasks

import (
	"errors"
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

// TestRunTimesSurviveMillisecondRounding: SQLite keeps River's times to
// the millisecond, rounded (riversqlite's timeString: UTC, Round(ms)), and
// River's fetch takes a job once the current millisecond reaches that
// time. For a task due at any microsecond of a millisecond, the time the
// store gives River (snooze's, as River adds it to its now, and
// insertAt's) is stored at least half a millisecond after the task's
// time, so the job is fetched after it whether SQLite's now is truncated
// or rounded, and the run that fetch starts (attempted_at, at least the
// stored time) is not taken for the early dispatch.
func TestRunTimesSurviveMillisecondRounding(t *testing.T) {
	stored := func(at time.Time) time.Time { return at.UTC().Round(time.Millisecond) }
	base := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	for us := range 1000 {
		due := base.Add(2*time.Second + time.Duration(us)*time.Microsecond)
		now := base // the early dispatch, at the task's creation
		var se *rivertype.JobSnoozeError
		if !errors.As(snooze(due.Sub(now)), &se) {
			t.Fatal("snooze does not snooze")
		}
		snoozed := stored(now.Add(se.Duration))
		inserted := stored(insertAt(base.Add(-time.Minute), due))
		for name, at := range map[string]time.Time{"snooze": snoozed, "insert": inserted} {
			if at.Before(due.Add(time.Millisecond / 2)) {
				t.Fatalf("%s: a task due at %s is stored for %s: fetched up to %s before its time", name,
					due.Format("15:04:05.000000"), at.Format("15:04:05.000"), due.Sub(at.Add(-time.Millisecond/2)))
			}
			job := &river.Job[dispatchArgs]{JobRow: &rivertype.JobRow{AttemptedAt: &at}, Args: dispatchArgs{Due: nano(due)}}
			if early(job) {
				t.Fatalf("%s: a run fetched at %s, after a task due at %s, counts as early", name, at.Format("15:04:05.000"), due.Format("15:04:05.000000"))
			}
		}
	}
}
