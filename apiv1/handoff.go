package apiv1

// HandOffBatch is POST /v1/internal/handoff/batch: up to 1 000 hand-offs
// (HandOff) to one region in one call. Servers send a batch whenever more
// than one task is bound for the same region; the single-item
// POST /v1/internal/handoff stays for one task and for older peers.
type HandOffBatch struct {
	Items []HandOff `json:"items"`
	// Commit carries the sender's word on earlier hand-offs to this region
	// (HandOffCommit with the items' From), so a stream of batches needs
	// no request of its own for it.
	Commit []string `json:"commit,omitempty"`
}

// HandOffItem is the receiver's answer about one item of a HandOffBatch,
// in the item's place.
type HandOffItem struct {
	ID string `json:"id"`
	// Status is the HTTP status the single-item endpoint would have given:
	// 200 accepted (or already held); 4xx refused, a definite answer (the
	// sender places the task again); anything else undecided (the sender
	// retries the same target with the same id).
	Status   int    `json:"status"`
	Accepted bool   `json:"accepted"`
	State    string `json:"state,omitempty"` // accepted: the task's state in the receiver
	// Duplicate is true when the receiver held this id already: an earlier
	// attempt landed and its answer was lost.
	Duplicate bool   `json:"duplicate,omitempty"`
	Canceled  bool   `json:"canceled,omitempty"` // the item's Cancel was carried out
	Error     *Error `json:"error,omitempty"`    // refused: why, field named items[i]....
}

// HandOffBatchResponse answers a HandOffBatch (200; per-item answers).
type HandOffBatchResponse struct {
	Results  []HandOffItem `json:"results"`
	Accepted int           `json:"accepted"`
	Refused  int           `json:"refused"`
}

// HandOffCommit is POST /v1/internal/handoff/commit: the sending region
// recorded these hand-offs as held by the receiver, which may now run them
// (they were held since they arrived: HandOff.From).
type HandOffCommit struct {
	From string   `json:"from"`
	IDs  []string `json:"ids"`
}

// HandOffCommitResponse answers a HandOffCommit: how many of the ids were
// held from that region and are released now (the others were released
// before, canceled, or are not here).
type HandOffCommitResponse struct {
	Released int `json:"released"`
}

// HandOffStatus is POST /v1/internal/handoff/status: a receiver (Region)
// asks the region that sent it held hand-offs what became of them there.
type HandOffStatus struct {
	Region string   `json:"region"`
	IDs    []string `json:"ids"`
}

// The sender's word on one hand-off (HandOffStatusItem.Status).
const (
	// HandOffCommitted: the sender's record forwards to the receiver, which
	// runs the task.
	HandOffCommitted = "committed"
	// HandOffRevoked: the sender placed the task elsewhere (or it ended
	// there); the receiver drops its copy unrun.
	HandOffRevoked = "revoked"
	// HandOffPending: the sender has not recorded an answer yet (the task
	// is in its outbox for the receiver); ask again later.
	HandOffPending = "pending"
	// HandOffUnknown: the sender has no record of the id although none of
	// its records can have expired yet (it lost its data): it can place
	// the task nowhere else, so the receiver runs it. (A missing record of
	// a task older than the sender's shortest retention is "revoked".)
	HandOffUnknown = "unknown"
)

// HandOffStatusItem is the sender's word on one id of a HandOffStatus.
type HandOffStatusItem struct {
	ID     string `json:"id"`
	Status string `json:"status"`
}

// HandOffStatusResponse answers a HandOffStatus, one item per id in order.
type HandOffStatusResponse struct {
	Results []HandOffStatusItem `json:"results"`
}
