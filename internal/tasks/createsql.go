package tasks

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// A batch of creates inserts its rows with multi-row statements and
// reserves each tenant's tasks at once, not with statements per task: on
// PostgreSQL each statement is a round trip to the server, and a batch of
// 32 creates cost 4 × 32 of them (insert, the tenant's two counter
// statements, the job link); the job links are still one per task. Rows
// go in chunks of 64, 32, 16, 8, 4, 2 and 1, so that the insert's text is
// one of seven: SQLite's statement cache (stmtcache.go) and pgx's keep
// each text once.

// taskKey names a task: its tenant and id.
type taskKey struct{ tenant, id string }

// rowChunks are the chunk sizes of a multi-row statement, largest first.
var rowChunks = [...]int{64, 32, 16, 8, 4, 2, 1}

// chunked calls f with consecutive chunks of n rows (sizes from rowChunks)
// until it returns an error.
func chunked(n int, f func(lo, hi int) error) error {
	lo := 0
	for _, size := range rowChunks {
		for n-lo >= size {
			if err := f(lo, lo+size); err != nil {
				return err
			}
			lo += size
		}
	}
	return nil
}

// insertSQLs caches insertSQL's text by dialect and row count.
var insertSQLs sync.Map // insertKey → string

type insertKey struct {
	postgres bool
	rows     int
}

// insertSQL is the INSERT of rows tasks, in the store's placeholder
// syntax.
func (s *RiverStore) insertSQL(rows int) string {
	k := insertKey{s.postgres, rows}
	if q, ok := insertSQLs.Load(k); ok {
		return q.(string)
	}
	q := s.sql(insertTaskHead + strings.Repeat(insertTaskRow+", ", rows-1) + insertTaskRow + insertTaskTail)
	insertSQLs.Store(k, q)
	return q
}

const (
	insertTaskHead = `INSERT INTO retrybroker_task
	(tenant, task_id, policy, state, not_before, give_up_after, create_time, update_time, next_run_time,
	 wait_reason, idempotency_key, dispatches, outcome, error, attempts, response, request, job_id,
	 callback_url, callback_state, trace_parent, trace_state)
	VALUES `
	insertTaskRow  = `(?, ?, ?, ?, ?, ?, ?, ?, ?, '', ?, 0, 0, '', '[]', NULL, ?, 0, ?, ?, ?, ?)`
	insertTaskTail = ` ON CONFLICT (tenant, task_id) DO NOTHING RETURNING seq, tenant, task_id`
)

// insertTasks inserts the rows of cands (distinct tasks) in tx and returns
// those it inserted, in cands' order: a task its tenant already has is not
// among them.
func (s *RiverStore) insertTasks(ctx context.Context, tx *sql.Tx, cands []*createReq, now time.Time) ([]*createReq, error) {
	got := make(map[taskKey]int64, len(cands))
	err := chunked(len(cands), func(lo, hi int) error {
		args := make([]any, 0, 15*(hi-lo))
		for _, r := range cands[lo:hi] {
			nt := &r.nt
			args = append(args, nt.Tenant, nt.ID, nt.Policy, StateScheduled, nano(nt.NotBefore), nano(nt.GiveUpAfter),
				nano(now), nano(now), nano(r.next), nt.IdempotencyKey, nt.Request,
				nt.CallbackURL, callbackStateAtCreate(nt.CallbackURL), nt.TraceParent, nt.TraceState)
		}
		rows, err := tx.QueryContext(ctx, s.insertSQL(hi-lo), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k taskKey
			var seq int64
			if err := rows.Scan(&seq, &k.tenant, &k.id); err != nil {
				return err
			}
			got[k] = seq
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("tasks: insert: %w", err)
	}
	inserted := make([]*createReq, 0, len(got))
	for _, r := range cands {
		if seq, ok := got[taskKey{r.nt.Tenant, r.nt.ID}]; ok {
			r.seq = seq
			inserted = append(inserted, r)
		}
	}
	return inserted, nil
}

// admitBatch counts the tasks just inserted against their tenants' bounds
// and returns those admitted, in order; a refused one has its *BoundError
// in err and its row deleted again. A tenant's tasks are reserved at once
// (two statements) when they all fit, which is the same as one by one in
// order, since the counters only grow within the batch; when they do not
// all fit, they are reserved one by one, so that those that fit are kept.
func (s *RiverStore) admitBatch(ctx context.Context, tx execer, inserted []*createReq) ([]*createReq, error) {
	var tenants []string
	byTenant := map[string][]*createReq{}
	for _, r := range inserted {
		if byTenant[r.nt.Tenant] == nil {
			tenants = append(tenants, r.nt.Tenant)
		}
		byTenant[r.nt.Tenant] = append(byTenant[r.nt.Tenant], r)
	}
	ok := make(map[*createReq]bool, len(inserted))
	for _, tenant := range tenants {
		rs := byTenant[tenant]
		var bytes int64
		for _, r := range rs {
			bytes += int64(len(r.nt.Request))
		}
		err := s.reserve(ctx, tx, tenant, int64(len(rs)), bytes)
		var be *BoundError
		switch {
		case err == nil:
			for _, r := range rs {
				ok[r] = true
			}
			continue
		case !errors.As(err, &be):
			return nil, err
		}
		for _, r := range rs {
			switch err := s.admitCreated(ctx, tx, tenant, r.nt.ID, int64(len(r.nt.Request))); {
			case errors.As(err, &be):
				r.err = err
			case err != nil:
				return nil, err
			default:
				ok[r] = true
			}
		}
	}
	fresh := make([]*createReq, 0, len(ok))
	for _, r := range inserted {
		if ok[r] {
			fresh = append(fresh, r)
		}
	}
	return fresh, nil
}

// linkJobs records in each task's row of fresh the id of its River job
// (ids, in the same order), one statement per row, by seq, the primary
// key: a single-row update by primary key is an index lookup whatever
// PostgreSQL's statistics say. As one multi-row statement per chunk, it
// was planned badly for minutes at a time while the table grew (see
// docs/tasks.md, "Storage: River").
func (s *RiverStore) linkJobs(ctx context.Context, tx execer, fresh []*createReq, ids []int64) error {
	q := s.sql(`UPDATE retrybroker_task SET job_id = ? WHERE seq = ?`)
	for i, r := range fresh {
		res, err := tx.ExecContext(ctx, q, ids[i], r.seq)
		if err != nil {
			return fmt.Errorf("tasks: link job: %w", err)
		}
		if n, err := res.RowsAffected(); err == nil && n != 1 {
			return fmt.Errorf("tasks: link job: %d rows linked for task %q", n, r.nt.ID)
		}
	}
	return nil
}
