package tasks

import (
	"context"
	"encoding/json"
)

// RiverJob returns the River job of the tenant's task: its attempt count
// and state, for tests that check what River was told.
func (s *RiverStore) RiverJob(ctx context.Context, tenant, id string) (attempt int, state string, err error) {
	r, err := s.getRow(ctx, tenant, id)
	if err != nil {
		return 0, "", err
	}
	j, err := s.client.JobGet(ctx, r.jobID)
	if err != nil {
		return 0, "", err
	}
	return j.Attempt, string(j.State), nil
}

// CreateBatch runs nts as one batch of creates, as the batcher groups
// concurrent ones, and returns each one's result, in order.
func (s *RiverStore) CreateBatch(ctx context.Context, nts []NewTask) ([]*Task, []bool, []error) {
	reqs := make([]*createReq, len(nts))
	for i, nt := range nts {
		if nt.IdempotencyKey == "" {
			nt.IdempotencyKey = "key-" + nt.Tenant + "-" + nt.ID
		}
		reqs[i] = &createReq{nt: nt}
	}
	s.createBatch(ctx, reqs)
	tasks, created, errs := make([]*Task, len(reqs)), make([]bool, len(reqs)), make([]error, len(reqs))
	for i, r := range reqs {
		tasks[i], created[i], errs[i] = r.task, r.created, r.err
	}
	return tasks, created, errs
}

// RiverJobTask returns the tenant and task id in the arguments of the
// River job linked to the tenant's task id.
func (s *RiverStore) RiverJobTask(ctx context.Context, tenant, id string) (string, string, error) {
	r, err := s.getRow(ctx, tenant, id)
	if err != nil {
		return "", "", err
	}
	j, err := s.client.JobGet(ctx, r.jobID)
	if err != nil {
		return "", "", err
	}
	var a dispatchArgs
	if err := json.Unmarshal(j.EncodedArgs, &a); err != nil {
		return "", "", err
	}
	return a.Tenant, a.TaskID, nil
}
