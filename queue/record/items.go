package record

// Item codes of the batch scripts (submit.lua, cold.lua): one character
// per task of the call, in order. A created task's character is its state
// code (record: 'P', 'R'); the others say why it was not created. Lua reads
// them as IC.<name> (queue/codes.go), never as bare characters.
const (
	ItemDuplicate    = '1' // a duplicate of an earlier task with the same key and spec; next: that task's id and state
	ItemKeyReused    = '2' // the key is held by a task of another spec; next: that task's id, ''
	ItemExists       = '3' // a task with this id exists; next: its id and state
	ItemPoolFull     = '4' // refused: its pool is at its admission limit; next: its id, ''
	ItemBacklogFull  = '5' // refused: its tenant's backlog is at its count cap; next: its id, ''
	ItemBacklogBytes = '6' // refused: its payload does not fit in its tenant's backlog bytes; next: its id, ''
	ItemBudget       = '7' // refused: its estimated cost does not fit in its tenant's budget ledger; next: its id, ''
)

// ItemCodes names every item code (for Lua: queue/codes.go IC), in the order above.
var ItemCodes = []struct {
	Name string
	Code byte
}{
	{"DUPLICATE", ItemDuplicate},
	{"KEY_REUSED", ItemKeyReused},
	{"EXISTS", ItemExists},
	{"POOL_FULL", ItemPoolFull},
	{"BACKLOG_FULL", ItemBacklogFull},
	{"BACKLOG_BYTES", ItemBacklogBytes},
	{"BUDGET", ItemBudget},
}

// IsItemRefusal reports whether c, one character of a batch script's
// codes, is an item code (the task was not created) rather than a state.
func IsItemRefusal(c byte) bool {
	for _, ic := range ItemCodes {
		if ic.Code == c {
			return true
		}
	}
	return false
}
