package record

import (
	"encoding/json"

	"github.com/ax-sched/ax/task"
)

// decodeProgress reads the record's progress field.
func decodeProgress(v string) *task.Progress {
	var p task.Progress
	if json.Unmarshal([]byte(v), &p) != nil {
		return nil
	}
	return &p
}
