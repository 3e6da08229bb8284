package record_test

import (
	"testing"

	"github.com/ax-sched/ax/queue/record"
	"github.com/ax-sched/ax/task"
)

// A batch script's character is a state code or an item code, never both:
// a created task and a refused one must not read alike.
func TestItemCodesAreNotStates(t *testing.T) {
	items := []byte{record.ItemDuplicate, record.ItemKeyReused, record.ItemExists,
		record.ItemPoolFull, record.ItemBacklogFull, record.ItemBacklogBytes}
	seen := map[byte]bool{}
	for _, c := range items {
		if seen[c] {
			t.Errorf("item code %q used twice", c)
		}
		seen[c] = true
		if !record.IsItemRefusal(c) {
			t.Errorf("IsItemRefusal(%q) = false", c)
		}
	}
	for _, st := range []task.State{task.Pending, task.Ready, task.Running, task.Success,
		task.Failed, task.Canceled, task.HandedOff, task.Timeout} {
		code := record.StateCodeOf(st)
		if len(code) != 1 {
			t.Fatalf("state %s has code %q", st, code)
		}
		if record.IsItemRefusal(code[0]) {
			t.Errorf("state %s's code %q is also an item code", st, code)
		}
	}
}
