package federation_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/ax-sched/ax/task"
)

// TestHandOffReceiverRefusesPastBacklog: a receiver counts the hand-offs
// it accepts against the tenant's max_backlog there and refuses the rest
// definitely; the sender places those again elsewhere (never in the
// refusing region again for a while: the refusals are counted once), each
// task lives in one place; and a submit that could only go to the
// refusing region is 429 naming max_backlog.
func TestHandOffReceiverRefusesPastBacklog(t *testing.T) {
	const limit, n = 3, 8
	f := newFed(t, fedtest.WithBacklog(az, "acme", limit))
	ctx := fedtest.Ctx(t)
	// az's spot pool is the cheapest for these tasks: the sender hands
	// all 8 there at once.
	f.R(aws).Stop()
	ids := fillOutbox(t, ctx, f.R(aws), az, poolSpot, n, payloadN)
	f.R(aws).Start()
	waitSettled(t, ctx, f, ids)
	inAZ, refused := 0, 0
	for _, id := range ids {
		w := f.Where(ctx, id)
		if len(w) != 1 {
			t.Fatalf("task %s lives in %v: want exactly one place", id, w)
		}
		if w[0] == az {
			inAZ++
		}
		tr, err := f.R(aws).Store.Tasks().Trail(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if fedtest.HasReason(tr, task.ReasonHandOffRefused) {
			refused++
		}
	}
	bl, err := f.R(az).Store.Submitter().Backlog(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if inAZ != limit || bl != limit || refused != n-limit {
		t.Fatalf("%s holds %d of the tasks (backlog %d), %d refused; want %d, %d and %d", az, inAZ, bl, refused, limit, limit, n-limit)
	}
	if got := handOffs(f.R(aws), az, "refused"); got != n-limit {
		t.Fatalf("ax_handoffs_total{outcome=refused} = %d, want %d (a refused task is not handed to the full region again)", got, n-limit)
	}
	// Only az allowed, and az refuses acme now: the submit is answered.
	r := f.Submit(aws, tokAcme, map[string]any{"type": "handoff.bulk", "tags": map[string]string{"arch": "x86"}, "regions": []string{az}})
	if r.Status != http.StatusTooManyRequests || !strings.Contains(string(r.Body), `"field":"max_backlog"`) || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a submit only az may take, while az refuses acme: %d %s", r.Status, r.Body)
	}
	// Another tenant is not held back.
	f.SubmitOK(aws, tokGlobex, map[string]any{"type": "handoff.bulk", "tags": map[string]string{"arch": "x86"}, "regions": []string{az}})
}
