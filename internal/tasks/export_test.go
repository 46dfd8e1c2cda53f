package tasks

import "context"

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
