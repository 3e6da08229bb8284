package worker

import "github.com/ax-sched/ax/worker/remote"

// Remote is a Source over the API's worker protocol, for a worker that
// holds only the URLs of its region's servers and a worker token (no
// Redis): give it to New. urls are tried in turn; a worker moves to the
// next on a connection error or a 503 and keeps its leases. Handlers see
// the same Task; TypeConcurrency is not available (claims cannot name
// types).
func Remote(urls []string, token string, opts remote.Options) (*remote.Source, error) {
	return remote.New(urls, token, opts)
}

// claimBatcher is a Source whose claims should be larger than
// DefaultClaimBatch unless Options.ClaimBatch says otherwise.
type claimBatcher interface{ ClaimBatch() int }

var (
	_ claimBatcher = (*remote.Source)(nil)
	_ Source       = (*remote.Source)(nil)
	_ Session      = (*remote.Source)(nil)
	_ Progressor   = (*remote.Source)(nil)
	_ beatPacer    = (*remote.Source)(nil)

	_ resultSizer = (*remote.Source)(nil)
)
