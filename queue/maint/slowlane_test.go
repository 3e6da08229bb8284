package maint

import (
	"math/rand/v2"
	"testing"
)

// placeDemand over random shards' work: the parts add up to the total;
// each shard keeps what it runs (when all run no more than the total);
// the rest goes to the shards with tasks waiting, each at least one when
// there is enough for all, and a shard alone with work takes it all.
func TestPlaceDemand(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		n := 2 + rng.IntN(4)
		total := 1 + rng.IntN(20)
		sh := make([]laneShard, n)
		ran, waiting, with := 0, 0, 0
		for i := range sh {
			sh[i] = laneShard{slots: []int{0}, running: []int{0}, parked: []int{0}}
			if rng.IntN(2) == 0 {
				sh[i].running[0] = rng.IntN(total + 1)
			}
			if rng.IntN(2) == 0 {
				sh[i].parked[0] = rng.IntN(3 * total)
			}
			ran += sh[i].running[0]
			waiting += sh[i].parked[0]
			if sh[i].parked[0] > 0 {
				with++
			}
		}
		turn := rng.IntN(n)
		out := placeDemand(total, sh, 0, turn)
		sum := 0
		for _, v := range out {
			sum += v
		}
		if sum != total {
			t.Fatalf("%v (turn %d), total %d: parts %v add up to %d", sh, turn, total, out, sum)
		}
		for i := range sh {
			if ran <= total && out[i] < sh[i].running[0] {
				t.Fatalf("%v, total %d: shard %d runs %d, its part %d", sh, total, i, sh[i].running[0], out[i])
			}
			if ran <= total && out[i] > sh[i].running[0]+sh[i].parked[0] && waiting > total-ran {
				t.Fatalf("%v, total %d: shard %d has a part %d past its work while others wait", sh, total, i, out[i])
			}
			if ran < total && total-ran >= with && sh[i].parked[0] > 0 && out[i] == sh[i].running[0] {
				t.Fatalf("%v, total %d: shard %d has tasks waiting and no part for them: %v", sh, total, i, out)
			}
			if alone := ran == sh[i].running[0] && waiting == sh[i].parked[0]; alone && ran+waiting >= total && ran <= total && out[i] != total {
				t.Fatalf("%v, total %d: shard %d alone with work has part %d of %v", sh, total, i, out[i], out)
			}
		}
	}
}
