package queue

// Transition table (DESIGN §2) as data. Every script moves a task only along
// these edges; the model test checks every trail entry against it.
var transitions = map[State]map[State][]string{
	"": {
		Pending: {ReasonSubmitted},
		Ready:   {ReasonPlaced},
	},
	Pending: {
		Pending:   {ReasonNoCapacity, ReasonPriority, ReasonHandOffRefused, ReasonDeferred},
		HandedOff: {ReasonHandedOff},
		Ready:     {ReasonDue, ReasonPlaced},
		Canceled:  {ReasonCanceledByUser, ReasonUpstreamFailed},
	},
	Ready: {
		Ready:    {ReasonPriority},
		Pending:  {ReasonDrained},
		Running:  {ReasonClaimed},
		Canceled: {ReasonCanceledByUser, ReasonUpstreamFailed},
	},
	Running: {
		Running:  {ReasonPriority, ReasonPreemptRequested},
		Success:  {ReasonCompleted},
		Pending:  {ReasonHandlerError, ReasonDeadline, ReasonPreempted, ReasonWorkerShutdown},
		Ready:    {ReasonPreempted, ReasonWorkerShutdown},
		Timeout:  {ReasonHeartbeatLost, ReasonDeadline},
		Failed:   {ReasonRetriesExhausted, ReasonNonRetryable},
		Canceled: {ReasonCanceledByUser},
	},
	Timeout: {
		Pending:  {ReasonHeartbeatLost, ReasonDeadline},
		Failed:   {ReasonRetriesExhausted},
		Canceled: {ReasonCanceledByUser},
	},
	Failed: {
		Pending: {ReasonReplayed},
	},
}

// Legal reports whether from→to with reason is an edge of the state machine.
func Legal(from, to State, reason string) bool {
	for _, r := range transitions[from][to] {
		if r == reason {
			return true
		}
	}
	return false
}
