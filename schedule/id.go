package schedule

import (
	"time"

	"github.com/ax-sched/ax/schedule/defs"
	"github.com/ax-sched/ax/schedule/runid"
)

// The derivations of run ids (package runid) and the stored definitions
// (package defs), by their short names here.
var (
	tenantOf     = defs.TenantOf
	errGone      = defs.ErrGone
	errNotLeader = defs.ErrNotLeader
	taskID       = runid.ID
	derivedSeq   = runid.DerivedSeq
	newSeq       = runid.NewSeq
	jitterOffset = runid.Jitter
)

// TaskID is the id of the task of one slot of a schedule whose ids are
// derived from its tenant and name (derivedSeq): the definitions stored
// without a sequence of their own. taskID is the general form.
func TaskID(tenant, name string, slot time.Time, home string) string {
	return taskID(derivedSeq(tenant, name), slot, home)
}

// Schedule errors an API caller sees (they carry their API code).
var (
	ErrExists   = defs.ErrExists
	ErrNotFound = defs.ErrNotFound
)

type (
	stored   = defs.Stored
	bfRecord = defs.BackfillRecord
	bfStored = defs.StoredBackfill
)
