package maint

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/ax-sched/ax/queue"
)

var budgetScript = queue.Load("budget")

// budgetKey is tenant's ledger of month ("2006-01") under shard prefix p (lib.lua bgkey).
func budgetKey(p, month, tenant string) string { return p + "bg:" + month + ":" + tenant }

// Ledger is a tenant's budget ledger of one UTC month in one shard
// (lib.lua bgkey): what the tenant's tasks hold there (Used: reserved
// estimates of tasks not ended and the actual cost of attempts run), the
// most Used may reach for a task to be admitted (Cap; HasCap false: no
// ledger, so nothing is admitted against it), and the submits refused
// over Cap so far.
type Ledger struct {
	Used, Cap float64
	HasCap    bool
	Refused   int64
}

// BudgetLedger reads tenant's ledger of month (its first instant, UTC) in
// shard, and with set makes it (Used from the month's cost records so far)
// and sets its Cap to max(Used, cap) atomically, so a lowered cap never
// leaves Used above it. Fenced (ErrFenced).
func (s *Maintainer) BudgetLedger(ctx context.Context, f queue.Fence, shard int, tenant string, month time.Time, set bool, cap float64) (Ledger, error) {
	p := s.Prefix(shard)
	first := month.UTC().Unix() / 86400
	today := max(s.Now().UTC().Unix()/86400, first)
	arg := ""
	if set {
		arg = strconv.FormatFloat(max(cap, 0), 'f', 12, 64)
	}
	out, err := s.Run(ctx, s.Client(), budgetScript, s.KeysWith(shard, queue.FenceKey(p, f), budgetKey(p, month.UTC().Format("2006-01"), tenant)),
		s.Clock(), f.Token, tenant, first, today, arg).Slice()
	if err != nil {
		return Ledger{}, fmt.Errorf("queue: budget ledger: %w", err)
	}
	if queue.Fenced(out) {
		return Ledger{}, queue.ErrFenced
	}
	if len(out) < 4 {
		return Ledger{}, fmt.Errorf("queue: budget ledger: short answer")
	}
	var l Ledger
	l.Used, _ = strconv.ParseFloat(queue.ToStr(out[1]), 64)
	if c := queue.ToStr(out[2]); c != "" {
		l.Cap, _ = strconv.ParseFloat(c, 64)
		l.HasCap = true
	}
	l.Refused, _ = strconv.ParseInt(queue.ToStr(out[3]), 10, 64)
	return l, nil
}
