package region

import (
	"math"

	"github.com/ax-sched/ax/queue"
)

// FederationShare is region's part of l, a limit that holds over all the
// federation's regions (listed in the federation's order), split by
// weights (a region left out weighs 1): the rate by weight, the burst and
// the concurrency by weight with the largest remainder (ties to the
// earlier region), at least 1 each, so with fewer slots than regions the
// federation's total is the number of regions. l is returned whole with
// fewer than two regions or when region is not among them.
func FederationShare(l queue.Limit, weights map[string]float64, region string, regions []string) queue.Limit {
	if len(regions) < 2 {
		return l
	}
	total, mine, at := 0.0, 0.0, -1
	ws := make([]float64, len(regions))
	for i, r := range regions {
		w, ok := weights[r]
		if !ok {
			w = 1
		}
		ws[i], total = w, total+w
		if r == region {
			mine, at = w, i
		}
	}
	if at < 0 || total <= 0 {
		return l
	}
	l.Rate *= mine / total
	l.Burst = largestRemainder(l.Burst, ws, total, at)
	l.Concurrency = largestRemainder(l.Concurrency, ws, total, at)
	return l
}

// largestRemainder is part at of v split by weights ws (summing to total):
// floors, then one more to the largest remainders, at least 1; 0 for v ≤ 0.
func largestRemainder(v int, ws []float64, total float64, at int) int {
	if v <= 0 {
		return 0
	}
	parts := make([]int, len(ws))
	rem := make([]float64, len(ws))
	left := v
	for i, w := range ws {
		x := float64(v) * w / total
		parts[i] = int(math.Floor(x))
		rem[i] = x - float64(parts[i])
		left -= parts[i]
	}
	for ; left > 0; left-- {
		best := 0
		for i := range rem {
			if rem[i] > rem[best] {
				best = i
			}
		}
		parts[best]++
		rem[best] = -1
	}
	return max(parts[at], 1)
}
