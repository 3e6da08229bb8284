package budget_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	qsubmit "github.com/ax-sched/ax/queue/submit"
	"github.com/ax-sched/ax/task"
)

// sharesRegion is one region of TestSharesLoop: its own Redis and store,
// and a Book whose SharesLoop runs under a fence of its own.
type sharesRegion struct {
	name  string
	st    *store.Store
	book  *budget.Book
	fence queue.Fence
}

const (
	sharesTenant = "acme"
	sharesBudget = 1.0  // USD a month
	sharesEach   = 0.01 // USD each task's estimate
)

func newSharesRegions(t *testing.T, cli budget.Shares, names ...string) []*sharesRegion {
	t.Helper()
	var out []*sharesRegion
	for _, name := range names {
		st, err := store.New(testenv.StartRedis(t).Client(), queue.Options{Region: name, Shards: 2})
		if err != nil {
			t.Fatal(err)
		}
		book := budget.New(budget.Config{Region: name, Regions: names, Ledgers: st.Maintainer(), Shares: cli,
			SharesPrefix: "/ax/budgets/", ShareInterval: 20 * time.Millisecond, Now: time.Now,
			Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
			Budgets: map[string]budget.Budget{sharesTenant: {MonthlyUSD: sharesBudget, Refuse: true}}}, nil)
		out = append(out, &sharesRegion{name: name, st: st, book: book, fence: queue.Fence{Name: "region", Token: 7}})
	}
	return out
}

// run runs r's SharesLoop until the test ends (or its fence is lost).
func (r *sharesRegion) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.book.SharesLoop(ctx, r.fence, func(err error) { t.Errorf("%s: fence lost: %v", r.name, err) })
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// submit stores one task of the tenant reserving its estimate and returns
// its id; "" when the ledger refused it (qsubmit.ErrBudget).
func (r *sharesRegion) submit(t *testing.T, ctx context.Context, hold string) string {
	sp := &task.Spec{Type: "test.noop", Tenant: sharesTenant, Payload: []byte(`{}`)}
	if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
		t.Error(err)
		return ""
	}
	res, err := r.st.Submitter().Submit(ctx, queue.NewTask{Spec: sp, Pool: "cpu", Budget: hold})
	switch {
	case err != nil:
		t.Error(err)
		return ""
	case errors.Is(res[0].Err, qsubmit.ErrBudget):
		return ""
	case res[0].Err != nil:
		t.Error(res[0].Err)
		return ""
	}
	return res[0].ID
}

// fill runs n submitters in each of rs until each has been refused for
// 1.5 s in a row (the shares had time to move room to where it is
// wanted), and returns the ids admitted in each region.
func fill(t *testing.T, ctx context.Context, hold string, n int, rs ...*sharesRegion) [][]string {
	ids := make([][]string, len(rs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, r := range rs {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				last := time.Now()
				for time.Since(last) < 1500*time.Millisecond && ctx.Err() == nil {
					if id := r.submit(t, ctx, hold); id != "" {
						mu.Lock()
						ids[i] = append(ids[i], id)
						mu.Unlock()
						last = time.Now()
					} else {
						time.Sleep(10 * time.Millisecond)
					}
				}
			}()
		}
	}
	wg.Wait()
	return ids
}

// ledgers is what r's ledgers hold and admit against, summed over its shards.
func (r *sharesRegion) ledgers(t *testing.T, ctx context.Context) (used, caps float64) {
	t.Helper()
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	for s := range r.st.Maintainer().Shards() {
		l, err := r.st.Maintainer().BudgetLedger(ctx, r.fence, s, sharesTenant, month, false, 0)
		if err != nil {
			t.Fatal(err)
		}
		used, caps = used+l.Used, caps+l.Cap
	}
	return used, caps
}

// The regions' shares of a refuse budget, kept by each region's
// SharesLoop through one document in a real etcd, over each region's real
// Redis: the shares never sum past the budget (the document checked at
// every read, the ledgers' caps once the loops are stopped), so what
// concurrent submitters in both regions get admitted never passes it; a
// region that refuses for its share gets the room the other does not use,
// so the budget fills to within a few estimates; an old leader's loop
// stops on its fence.
func TestSharesLoop(t *testing.T) {
	e := testenv.StartEtcd(t)
	shares := budget.EtcdShares{Client: e.Client()}
	rs := newSharesRegions(t, shares, "us-east-1", "eu-west-1")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, r := range rs {
		r.run(t)
	}
	hold := time.Now().UTC().Format("2006-01") + " " + "0.010000000000"
	key := "/ax/budgets/" + sharesTenant + "/" + time.Now().UTC().Format("2006-01")

	// The document: read while the submitters run, it never allots more
	// than the budget.
	var docs, over atomic.Int64
	stopDocs := make(chan struct{})
	var wg sync.WaitGroup // the reader of the document
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopDocs:
				return
			case <-time.After(5 * time.Millisecond):
			}
			raw, _, err := shares.Get(ctx, key)
			var doc map[string]struct{ Alloc float64 }
			if err != nil || len(raw) == 0 || json.Unmarshal(raw, &doc) != nil {
				continue
			}
			sum := 0.0
			for _, s := range doc {
				sum += s.Alloc
			}
			docs.Add(1)
			if sum > sharesBudget+1e-9 {
				over.Add(1)
				t.Errorf("shares document allots $%.6f of $%g: %s", sum, sharesBudget, raw)
			}
		}
	}()

	// Eight submitters per region, at the edge of a ledger not yet made.
	ids := fill(t, ctx, hold, 8, rs...)
	close(stopDocs)
	wg.Wait()
	admitted := func(ids ...[]string) float64 {
		n := 0
		for _, l := range ids {
			n += len(l)
		}
		return float64(n) * sharesEach
	}
	total := admitted(ids...)
	t.Logf("admitted %d in %s and %d in %s: $%.2f of $%g; %d reads of the document", len(ids[0]), rs[0].name,
		len(ids[1]), rs[1].name, total, sharesBudget, docs.Load())
	if total > sharesBudget+1e-9 || total < 0.9*sharesBudget {
		t.Fatalf("admitted $%.4f, want at most the budget $%g and at least 90 %% of it", total, sharesBudget)
	}
	if docs.Load() == 0 || over.Load() > 0 {
		t.Fatalf("document reads %d, %d over the budget", docs.Load(), over.Load())
	}
	check := func(ids [][]string) {
		t.Helper()
		var used, caps float64
		for i, r := range rs {
			u, c := r.ledgers(t, ctx)
			if math.Abs(u-admitted(ids[i])) > 1e-9 {
				t.Errorf("%s: ledgers hold $%.6f for $%.6f admitted", r.name, u, admitted(ids[i]))
			}
			used, caps = used+u, caps+c
		}
		if caps > sharesBudget+1e-9 {
			t.Errorf("the ledgers' caps sum to $%.6f, past the budget $%g (held $%.6f)", caps, sharesBudget, used)
		}
	}
	check(ids)

	// The tasks of the first region end (canceled: their estimates are
	// released); only the second's submitters want room: the first's
	// unused share moves to it.
	for _, id := range ids[0] {
		if _, err := rs[0].st.Tasks().Cancel(ctx, id, task.ReasonCanceledByUser, "test"); err != nil {
			t.Fatal(err)
		}
	}
	freed := admitted(ids[0])
	more := fill(t, ctx, hold, 4, rs[1])
	t.Logf("%s's tasks ended ($%.2f released); %s admitted $%.2f more", rs[0].name, freed, rs[1].name, admitted(more[0]))
	// The room: what the first region released and what the first fill
	// left unadmitted.
	room := freed + sharesBudget - total
	if got := admitted(more[0]); got < room-0.1*sharesBudget || got > room+1e-9 {
		t.Fatalf("%s admitted $%.4f once %s released $%.4f (room $%.4f), want within 10 %% of the budget under the room", rs[1].name, got, rs[0].name, freed, room)
	}
	check([][]string{nil, append(ids[1], more[0]...)})

	// An old leader's loop stops on its fence (a newer token wrote since).
	lost := make(chan error, 1)
	octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
	defer ocancel()
	rs[0].book.SharesLoop(octx, queue.Fence{Name: "region", Token: 6}, func(err error) { lost <- err })
	select {
	case err := <-lost:
		if !errors.Is(err, queue.ErrFenced) {
			t.Fatalf("old leader: %v, want ErrFenced", err)
		}
	default:
		t.Fatal("an old leader's SharesLoop went on until its context ended")
	}
}
