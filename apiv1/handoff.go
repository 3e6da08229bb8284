package apiv1

// HandOffBatch is POST /v1/internal/handoff/batch: up to 1 000 hand-offs
// (HandOff) to one region in one call. Servers send a batch whenever more
// than one task is bound for the same region; the single-item
// POST /v1/internal/handoff stays for one task and for older peers.
type HandOffBatch struct {
	Items []HandOff `json:"items"`
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
