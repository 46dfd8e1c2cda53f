package tasks

import (
	"testing"
	"time"
)

// TestRiverRetentionAligned: River keeps the job rows of final tasks no
// longer than the tasks (nor than its own defaults), and the sweep runs
// often enough for the shorter retention.
func TestRiverRetentionAligned(t *testing.T) {
	h, d := time.Hour, 24*time.Hour
	for _, c := range []struct {
		retention, failed    time.Duration
		done, discarded, run time.Duration
	}{
		{DefaultRetention, DefaultFailedRetention, d, 7 * d, time.Minute},
		{h, 2 * h, h, 2 * h, time.Minute},
		{2 * h, h, h, h, time.Minute},
		{5 * time.Second, 5 * time.Second, 5 * time.Second, 5 * time.Second, time.Second},
	} {
		l := limits{retention: c.retention, failedRetention: c.failed}
		done, discarded := l.riverRetention()
		if done != c.done || discarded != c.discarded {
			t.Errorf("retention %s/%s: river keeps %s/%s, want %s/%s", c.retention, c.failed, done, discarded, c.done, c.discarded)
		}
		if got := l.sweepEvery(); got != c.run {
			t.Errorf("retention %s/%s: sweep every %s, want %s", c.retention, c.failed, got, c.run)
		}
	}
}
