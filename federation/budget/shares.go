package budget

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/maint"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Ledgers are the region's budget ledgers in its Redis, one per shard
// (maint.Maintainer.BudgetLedger; docs/cost.md "Budgets").
type Ledgers interface {
	Shards() int
	BudgetLedger(ctx context.Context, f queue.Fence, shard int, tenant string, month time.Time, set bool, cap float64) (maint.Ledger, error)
}

// Shares is where the regions agree on their shares of each budget: one
// document per tenant and month in the global etcd, written with a
// compare-and-swap, so the shares never sum past the budget whatever the
// regions do at once.
type Shares interface {
	// Get is key's value and its modification revision (0: absent).
	Get(ctx context.Context, key string) ([]byte, int64, error)
	// Swap puts val at key if key's modification revision is still rev
	// (0: absent); false when it moved.
	Swap(ctx context.Context, key string, val []byte, rev int64) (bool, error)
}

// EtcdShares is Shares in an etcd (the global one).
type EtcdShares struct{ Client *clientv3.Client }

var _ Shares = EtcdShares{}

func (e EtcdShares) Get(ctx context.Context, key string) ([]byte, int64, error) {
	resp, err := e.Client.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return nil, 0, err
	}
	return resp.Kvs[0].Value, resp.Kvs[0].ModRevision, nil
}

func (e EtcdShares) Swap(ctx context.Context, key string, val []byte, rev int64) (bool, error) {
	resp, err := e.Client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).Then(clientv3.OpPut(key, string(val))).Commit()
	if err != nil {
		return false, err
	}
	return resp.Succeeded, nil
}

// share is one region's entry of a budget's shares document.
type share struct {
	// Alloc is what the region's tasks may hold of the budget (their
	// spend and the estimates of those unfinished): its ledgers' caps.
	Alloc float64 `json:"alloc"`
	Used  float64 `json:"used"` // what they held at its last pass
	// Want: the region refused a task for its share since its last pass.
	Want bool `json:"want,omitempty"`
}

// ShareIntervalDefault is how often a region's leader rebalances its
// shares: a region refusing for its share gets more within about that.
const ShareIntervalDefault = time.Second

// SharesLoop keeps this region's share of each refuse budget until ctx
// ends (a leader loop; f fences its ledger writes). Every pass, per
// tenant: Used is what the region's ledgers hold; the budget left (the
// budget less every region's Used) is split between the regions, those
// that refused a task for their share since their last pass weighing 4
// times the others; the region's Alloc becomes its Used plus its part,
// never more than the budget less the other regions' Alloc. A growing
// share is written to the global etcd first, then to the ledgers' caps; a
// shrinking one to the caps first (each cap at least its shard's Used
// then), then their sum to etcd. So the caps the ledgers admit against
// never sum, across regions, past the budget: what a tenant's tasks are
// expected to cost is admitted only while it fits, and the overshoot is
// what they cost past their estimates. Unreachable global etcd: the
// region keeps the share it has.
func (bk *Book) SharesLoop(ctx context.Context, f queue.Fence, lost func(error)) {
	if bk.cfg.Ledgers == nil || bk.cfg.Shares == nil {
		<-ctx.Done()
		return
	}
	refused := map[string]int64{}
	t := time.NewTicker(bk.cfg.ShareInterval)
	defer t.Stop()
	for {
		for tenant, b := range bk.budgetSet() {
			if b.MonthlyUSD <= 0 || !b.Refuse {
				continue
			}
			err := bk.rebalance(ctx, f, tenant, b.MonthlyUSD, refused)
			switch {
			case errors.Is(err, queue.ErrFenced):
				lost(err)
				return
			case err != nil && ctx.Err() == nil:
				bk.cfg.Logger.Warn("budget share not rebalanced; the region keeps the one it has", "tenant", tenant, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// rebalance is one pass of SharesLoop for tenant's budget of usd.
func (bk *Book) rebalance(ctx context.Context, f queue.Fence, tenant string, usd float64, refused map[string]int64) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	now := bk.cfg.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	n := bk.cfg.Ledgers.Shards()
	ls := make([]maint.Ledger, n)
	var used, caps float64
	var rf int64
	for s := range n {
		l, err := bk.cfg.Ledgers.BudgetLedger(ctx, f, s, tenant, month, false, 0)
		if err == nil && !l.HasCap {
			// A new ledger: made with its Used from the month's costs,
			// admitting nothing past them until the share is set.
			l, err = bk.cfg.Ledgers.BudgetLedger(ctx, f, s, tenant, month, true, 0)
		}
		if err != nil {
			return err
		}
		ls[s] = l
		used, caps, rf = used+l.Used, caps+l.Cap, rf+l.Refused
	}
	key := bk.cfg.SharesPrefix + tenant + "/" + month.Format("2006-01")
	raw, rev, err := bk.cfg.Shares.Get(ctx, key)
	if err != nil {
		return err
	}
	doc := map[string]share{}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &doc); err != nil {
			return err
		}
	}
	me := share{Used: used, Want: rf > refused[tenant]}
	target := bk.target(doc, me, usd)
	if target < caps {
		// Shrink the caps first: the share written is what they hold. No
		// shard's cap grows here (a shard's u may have reached its old cap
		// meanwhile, and the ledger keeps a cap at least u), so what they
		// hold is at most the share written before.
		var sum float64
		for s := range n {
			l, err := bk.cfg.Ledgers.BudgetLedger(ctx, f, s, tenant, month, true, min(ls[s].Cap, ls[s].Used+(target-used)/float64(n)))
			if err != nil {
				return err
			}
			sum += l.Cap
		}
		target = sum
	}
	me.Alloc = target
	doc[bk.cfg.Region] = me
	val, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	if ok, err := bk.cfg.Shares.Swap(ctx, key, val, rev); err != nil || !ok {
		// Another region moved first: the next pass reads its share.
		return err
	}
	refused[tenant] = rf
	if target > caps {
		// Each shard's cap grows by its part of the growth, never shrinks
		// (u, at most the old cap, never lifts one past what is asked), so
		// the caps sum to the share written.
		for s := range n {
			if _, err := bk.cfg.Ledgers.BudgetLedger(ctx, f, s, tenant, month, true, ls[s].Cap+(target-caps)/float64(n)); err != nil {
				return err
			}
		}
	}
	return nil
}

// target is the Alloc this region's share should have, from the others'
// entries in doc: its Used plus its part of what is left of the budget
// (usd), at most the budget less the others' Alloc (or Used, when more).
func (bk *Book) target(doc map[string]share, me share, usd float64) float64 {
	weight := func(s share) float64 {
		if s.Want {
			return 4
		}
		return 1
	}
	left, held, total := usd-me.Used, 0.0, weight(me)
	for _, r := range bk.cfg.Regions {
		if r == bk.cfg.Region {
			continue
		}
		s := doc[r]
		left -= s.Used
		held += math.Max(s.Alloc, s.Used)
		total += weight(s)
	}
	part := math.Max(left, 0) * weight(me) / total
	return math.Max(math.Min(me.Used+part, usd-held), 0)
}
