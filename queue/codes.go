package queue

import (
	"fmt"
	"strings"
)

// Result codes of the scripts: the first entry of an answer of a script
// that acts on one task or run (each script's Returns header says what
// follows it). This table is their one definition: the Lua scripts read
// them as RC.<name> from a table generated from it (luaCodes), never as
// bare numbers.
const (
	codeFenced          = -1 // a leader-only write with an old fencing token (the whole answer)
	CodeOK              = 0  // done
	codeIllegal         = 1  // the task's state does not allow it; next: the state
	codeNotFound        = 2  // no such task
	codeHandedOff       = 3  // it lives in another region; next: the region
	codeHandOffInFlight = 4  // its hand-off is in flight; next: the target region
	CodeLeaseLost       = 5  // (complete, fail, return) the lease token is not the task's; next: the state
	codeDAGNotFound     = 6  // (dag_update, dag_cancel) no such run, or another tenant's (the whole answer)
	codeBatchNotFound   = 7  // (batch_add, batch_seal, batch_member) no such batch (the whole answer)
	codeRefused         = 8  // (quota, backlog reserve) not taken, nothing changed; next (quota): the wait in ms
	CodeExists          = 9  // (dag_create) a run with this id exists, nothing changed (the whole answer)
)

// resultCodes names every code for Lua, in the order above.
var resultCodes = []struct {
	name string
	code int
}{
	{"FENCED", codeFenced},
	{"OK", CodeOK},
	{"ILLEGAL", codeIllegal},
	{"NOT_FOUND", codeNotFound},
	{"HANDED_OFF", codeHandedOff},
	{"HANDOFF_IN_FLIGHT", codeHandOffInFlight},
	{"LEASE_LOST", CodeLeaseLost},
	{"DAG_NOT_FOUND", codeDAGNotFound},
	{"BATCH_NOT_FOUND", codeBatchNotFound},
	{"REFUSED", codeRefused},
	{"EXISTS", CodeExists},
}

// Item codes of the batch scripts (submit.lua, cold.lua): one character
// per task of the call, in order. A created task's character is its state
// code (record: 'P', 'R'); the others say why it was not created. Lua reads
// them as IC.<name> (luaCodes), never as bare characters.
const (
	ItemDuplicate    = '1' // a duplicate of an earlier task with the same key and spec; next: that task's id and state
	ItemKeyReused    = '2' // the key is held by a task of another spec; next: that task's id, ''
	ItemExists       = '3' // a task with this id exists; next: its id and state
	ItemPoolFull     = '4' // refused: its pool is at its admission limit; next: its id, ''
	ItemBacklogFull  = '5' // refused: its tenant's backlog is at its count cap; next: its id, ''
	ItemBacklogBytes = '6' // refused: its payload does not fit in its tenant's backlog bytes; next: its id, ''
)

// itemCodes names every item code for Lua, in the order above.
var itemCodes = []struct {
	name string
	code byte
}{
	{"DUPLICATE", ItemDuplicate},
	{"KEY_REUSED", ItemKeyReused},
	{"EXISTS", ItemExists},
	{"POOL_FULL", ItemPoolFull},
	{"BACKLOG_FULL", ItemBacklogFull},
	{"BACKLOG_BYTES", ItemBacklogBytes},
}

// IsItemRefusal reports whether c, one character of a batch script's
// codes, is an item code (the task was not created) rather than a state.
func IsItemRefusal(c byte) bool {
	for _, ic := range itemCodes {
		if ic.code == c {
			return true
		}
	}
	return false
}

// luaCodes is the declaration of RC (result codes) and IC (item codes),
// the tables every script reads, placed at the top of lib.lua
// (scripts.go libSource).
func luaCodes() string {
	var b strings.Builder
	b.WriteString("-- RC, IC: the scripts' result and item codes, generated from queue/codes.go.\nlocal RC = {")
	for i, c := range resultCodes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = %d", c.name, c.code)
	}
	b.WriteString("}\nlocal IC = {")
	for i, c := range itemCodes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s = '%c'", c.name, c.code)
	}
	b.WriteString("}\n")
	return b.String()
}

func Fenced(out []any) bool { return len(out) == 1 && ToInt(out[0]) == codeFenced }

// BatchMissing reports a batch script's answer for no such batch.
func BatchMissing(out []any) bool { return len(out) == 1 && ToInt(out[0]) == codeBatchNotFound }

// dagMissing reports a DAG script's answer for no such run.
func DagMissing(out []any) bool { return len(out) == 1 && ToInt(out[0]) == codeDAGNotFound }
