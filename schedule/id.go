package schedule

import (
	"time"

	"github.com/ax-sched/ax/schedule/runid"
)

// The derivations of run ids (package runid), by their short names here.
var (
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

// idSeq is the sequence part of the schedule's task ids: the one drawn at
// its creation (newSeq), or, for a definition stored without one (created
// by an earlier version), derivedSeq of its tenant and name — "" for a
// legacy definition — so its slots keep the ids they had.
func (sd stored) idSeq() uint64 {
	if sd.seq != nil {
		return uint64(*sd.seq)
	}
	return derivedSeq(sd.idTenant(), sd.def.Name)
}
