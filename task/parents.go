package task

// MaxParentResults bounds the parents' results a DAG node's task carries,
// all together (bytes): within a single hand-off's body beside the
// largest payload. A node whose parents gave more is not released (its
// node FAILED, reason INVALID_SPEC).
const MaxParentResults = 768 << 10

// ParentResults are the results of a DAG node's parents that SUCCEEDED,
// by parent node id, as their handlers gave them (text or bytes). A DAG
// run's release writes them into the node's task; a handler reads them
// (worker.Task.ParentResult). A parent whose result had expired, or that
// did not succeed, is absent.
type ParentResults map[string][]byte

// Size is the bytes the results and their names take.
func (p ParentResults) Size() int {
	n := 0
	for k, v := range p {
		n += len(k) + len(v)
	}
	return n
}

// checkParents bounds Spec.Parents.
func (s *Spec) checkParents() error {
	if len(s.Parents) == 0 {
		s.Parents = nil
		return nil
	}
	if n := s.Parents.Size(); n > MaxParentResults {
		return fieldErr("parents", "the parents' results take %d bytes, over %d", n, MaxParentResults)
	}
	return nil
}

// RefuseInternal refuses a spec a client sent that sets what only ax sets
// (parents: a DAG run writes them when it releases a node; batch: a
// batch's create writes it into its members; schedule_end: a schedule
// writes it into its slots' tasks).
func (s *Spec) RefuseInternal() error {
	if s.Parents != nil {
		return fieldErr("parents", "is set by a DAG run when it releases a node; a submit cannot give it")
	}
	if s.Batch != "" {
		return fieldErr("batch", "is set by POST /v1/batches for its members; a submit cannot give it")
	}
	if s.ScheduleEnd != "" {
		return fieldErr("schedule_end", "is set by a schedule for its slots' tasks; a submit cannot give it")
	}
	return nil
}
