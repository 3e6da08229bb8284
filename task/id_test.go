package task_test

import (
	"testing"
	"time"

	"github.com/ax-sched/ax/task"
)

// A generator's ids sort by creation inside a millisecond, and the
// sequence of the next millisecond's first id says nothing of how many ids
// came before: over 200 milliseconds with 7 ids each, the first ids'
// sequences are not a count (most steps between them are far from 7, and
// they go down as often as up, roughly).
func TestIDSequenceHidesVolume(t *testing.T) {
	g := task.NewIDGen()
	start := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	seq := func(id string) string { return id[10:16] }
	var firsts []string
	for ms := range 200 {
		now := start.Add(time.Duration(ms) * time.Millisecond)
		prev := ""
		for i := range 7 {
			id := g.New("us-east-1", 0, now)
			if prev != "" && id <= prev {
				t.Fatalf("ids of one millisecond not increasing: %s then %s", prev, id)
			}
			if i == 0 {
				firsts = append(firsts, seq(id))
			}
			prev = id
		}
	}
	down := 0
	for i := 1; i < len(firsts); i++ {
		if firsts[i] < firsts[i-1] {
			down++
		}
	}
	if down < 50 || down > 150 {
		t.Fatalf("the first sequences of 200 milliseconds went down %d times: they count", down)
	}
}
