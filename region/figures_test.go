package region

import "testing"

// A pool's utilisation counts slot units, not tasks: four tasks of slots
// 0.25 fill one slot; figures of a leader that published no running_slots
// count whole tasks.
func TestUtilisationCountsSlotUnits(t *testing.T) {
	tests := []struct {
		name string
		p    PoolFigures
		busy float64
		util float64
	}{
		{"four quarters on one slot", PoolFigures{Slots: 1, Running: 4, RunningSlots: 1}, 1, 1},
		{"four quarters on four slots", PoolFigures{Slots: 4, Running: 4, RunningSlots: 1}, 1, 0.25},
		{"whole tasks", PoolFigures{Slots: 4, Running: 2, RunningSlots: 2}, 2, 0.5},
		{"an older leader's figures", PoolFigures{Slots: 4, Running: 2}, 2, 0.5},
		{"idle", PoolFigures{Slots: 4}, 0, 0},
		{"no slots", PoolFigures{Running: 1, RunningSlots: 0.5}, 0.5, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if b, u := tc.p.Busy(), tc.p.Utilisation(); b != tc.busy || u != tc.util {
				t.Fatalf("busy %v, utilisation %v; want %v, %v", b, u, tc.busy, tc.util)
			}
		})
	}
}
