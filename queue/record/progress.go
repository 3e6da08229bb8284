package record

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/ax-sched/ax/task"
)

// decodeProgress reads the record's progress field: "<attempt>\t<percent>
// \t<updated ms>\t<message>" (lib.lua set_progress), or the JSON of
// task.Progress that older servers wrote.
func decodeProgress(v string) *task.Progress {
	if strings.HasPrefix(v, "{") {
		var p task.Progress
		if json.Unmarshal([]byte(v), &p) != nil {
			return nil
		}
		return &p
	}
	f := strings.SplitN(v, "\t", 4)
	if len(f) != 4 {
		return nil
	}
	pct, err := strconv.ParseFloat(f[1], 64)
	if err != nil {
		return nil
	}
	p := &task.Progress{Attempt: Atoi(f[0]), Percent: pct, Message: f[3]}
	if at := MsTime(f[2]); at != nil {
		p.UpdatedAt = *at
	}
	return p
}

// progressOf is the progress a read shows: the recorded one while it is
// of the task's latest attempt; once a new attempt has started (and not
// yet said how far it got), 0 of that attempt, saying so.
func progressOf(t *task.Task) *task.Progress {
	p := t.Progress
	if p == nil || p.Attempt == 0 || p.Attempt >= t.Attempts || t.Attempts == 0 {
		return p
	}
	var at = p.UpdatedAt
	if t.StartedAt != nil {
		at = *t.StartedAt
	}
	return &task.Progress{Attempt: t.Attempts, Message: "attempt " + strconv.Itoa(t.Attempts) + " started", UpdatedAt: at}
}
