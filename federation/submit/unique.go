package submit

import (
	"context"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// released reports whether the unique key that refused the item is held
// by a task handed off to another region that is past the key's
// unique_until there: the item is then stored again, taking the key from
// that task (queue.NewTask.Supersedes), once. The key's home region sees
// only its forwarding record, which holds the key until unique_for ends.
func (p *submitPass) released(ctx context.Context, it *item, r queue.SubmitResult) bool {
	sp := it.spec
	if !r.Duplicate || sp.UniqueKey == "" || sp.UniqueUntil == task.UniqueUntilWindow ||
		r.State != task.HandedOff || it.nt.Supersedes != "" || p.n.cfg.Locate == nil {
		return false
	}
	t, err := p.n.cfg.Locate(ctx, r.ID)
	if err != nil || t.State == task.HandedOff {
		return false
	}
	waiting := t.State == task.Pending || t.State == task.Ready
	if t.State.Terminal() || (sp.UniqueUntil == task.UniqueUntilStarted && !waiting) {
		it.nt.Supersedes = r.ID
		return true
	}
	return false
}
