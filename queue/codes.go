package queue

import (
	"fmt"
	"strings"

	"github.com/ax-sched/ax/queue/record"
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

// luaCodes is the declaration of RC (result codes) and IC (item codes),
// the tables every script reads, placed at the top of lib.lua
// (scripts.go libSource).
func luaCodes() string {
	rc := make([]string, len(resultCodes))
	for i, c := range resultCodes {
		rc[i] = fmt.Sprintf("%s = %d", c.name, c.code)
	}
	ic := make([]string, len(record.ItemCodes))
	for i, c := range record.ItemCodes {
		ic[i] = fmt.Sprintf("%s = '%c'", c.Name, c.Code)
	}
	return "-- RC, IC: the scripts' result and item codes, generated from queue/codes.go.\n" +
		"local RC = {" + strings.Join(rc, ", ") + "}\nlocal IC = {" + strings.Join(ic, ", ") + "}\n"
}

func Fenced(out []any) bool { return len(out) == 1 && ToInt(out[0]) == codeFenced }

// BatchMissing reports a batch script's answer for no such batch.
func BatchMissing(out []any) bool { return len(out) == 1 && ToInt(out[0]) == codeBatchNotFound }

// dagMissing reports a DAG script's answer for no such run.
func DagMissing(out []any) bool { return len(out) == 1 && ToInt(out[0]) == codeDAGNotFound }
