package memstore

import "container/heap"

// inflight is a gate's in-flight registrations (the calls admitted against
// a known quota or within a learned one, until their Complete or their
// ticket's expiry): a min-heap by expiry with an index by ticket id. It
// answers what Admit asks on every call (how many are live, the earliest
// expiry) in O(1) while nothing expired, and adds and removes in
// O(log n): a gate with hundreds of calls in flight (GitHub's quota, a
// few hundred callers) no longer costs a pass over all of them, twice,
// under the store's one lock, for each Admit and each Complete.
//
// A nil set is empty (most gates never hold a registration); add needs a
// set. Lookups never drop expired entries (a query at an earlier time
// still counts them); prune does.
type inflight struct {
	byID map[string]*ticketAt
	h    ticketHeap
	// latest bounds the expiry of every entry: the latest added since the
	// set was last empty (free reads it; it is exact when the set empties,
	// and otherwise late by at most the time between the last
	// registrations, so a gate is never forgotten while it holds one).
	latest int64
	spare  []*ticketAt // removed entries, reused by add (at most maxSpare)
}

// maxSpare bounds the removed entries a set keeps for reuse.
const maxSpare = 64

// ticketAt is one registration: its ticket id, its expiry (µs) and its
// place in the heap.
type ticketAt struct {
	id  string
	exp int64
	i   int
}

// ticketHeap orders registrations by expiry (container/heap).
type ticketHeap []*ticketAt

func (h ticketHeap) Len() int           { return len(h) }
func (h ticketHeap) Less(i, j int) bool { return h[i].exp < h[j].exp }
func (h ticketHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].i, h[j].i = i, j
}

func (h *ticketHeap) Push(x any) {
	t := x.(*ticketAt)
	t.i = len(*h)
	*h = append(*h, t)
}

func (h *ticketHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return t
}

// len is the number of registrations, live or expired.
func (f *inflight) len() int {
	if f == nil {
		return 0
	}
	return len(f.h)
}

// add registers id until exp (µs). An id already registered moves to exp.
func (f *inflight) add(id string, exp int64) {
	if f.byID == nil {
		f.byID = make(map[string]*ticketAt)
	}
	if t, ok := f.byID[id]; ok {
		t.exp = exp
		heap.Fix(&f.h, t.i)
	} else {
		if k := len(f.spare); k > 0 {
			t, f.spare = f.spare[k-1], f.spare[:k-1]
			*t = ticketAt{id: id, exp: exp}
		} else {
			t = &ticketAt{id: id, exp: exp}
		}
		f.byID[id] = t
		heap.Push(&f.h, t)
	}
	f.latest = max(f.latest, exp)
}

// remove drops id's registration, if it has one.
func (f *inflight) remove(id string) {
	if f == nil {
		return
	}
	t, ok := f.byID[id]
	if !ok {
		return
	}
	delete(f.byID, id)
	heap.Remove(&f.h, t.i)
	if len(f.spare) < maxSpare {
		t.id = ""
		f.spare = append(f.spare, t)
	}
	if len(f.h) == 0 {
		f.latest = 0
	}
}

// live returns the number of registrations live at now (expiring after
// it) and the earliest expiry among them (0 when none is). It visits only
// the entries expired at now and their children: none, while no ticket
// was lost.
func (f *inflight) live(now int64) (n, first int64) {
	if f == nil || len(f.h) == 0 {
		return 0, 0
	}
	if root := f.h[0].exp; root > now { // the common case: nothing expired
		return int64(len(f.h)), root
	}
	expired := int64(0)
	var walk func(i int)
	walk = func(i int) {
		if i >= len(f.h) {
			return
		}
		if e := f.h[i].exp; e > now { // all below it are live too
			if first == 0 || e < first {
				first = e
			}
			return
		}
		expired++
		walk(2*i + 1)
		walk(2*i + 2)
	}
	walk(0)
	return int64(len(f.h)) - expired, first
}

// prune drops the registrations expired at now.
func (f *inflight) prune(now int64) {
	if f == nil {
		return
	}
	for len(f.h) > 0 && f.h[0].exp <= now {
		t := heap.Pop(&f.h).(*ticketAt)
		delete(f.byID, t.id)
	}
	if len(f.h) == 0 {
		f.latest = 0
	}
}
