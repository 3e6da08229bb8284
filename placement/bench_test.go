package placement

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// benchPools builds n pools from testdata/prices.csv rows (price per slot-hour = VM price ÷ vCPUs,
// or the VM price for single-GPU rows), spread over up to 36 regions (the 9 real ones, copied with
// suffixes), half of the copies at spot prices, with varied fill and a few unhealthy or stale.
func benchPools(tb testing.TB, n int, published time.Time) []Pool {
	rows := prices(tb)
	pools := make([]Pool, n)
	for i := range pools {
		r := rows[(i*7)%len(rows)]
		copyNo := i / len(rows)
		region := r.region
		if copyNo > 0 {
			region += "-" + strconv.Itoa(copyNo%4)
		}
		name := r.instance
		if name == "" {
			name = r.accelerator
		}
		p := Pool{
			Region: region, Name: fmt.Sprintf("%s-%d", name, i),
			Tags:  map[string]string{"provider": r.provider, "class": "cpu", "vcpus": strconv.Itoa(int(r.vcpus))},
			Slots: 64, Running: (i * 13) % 65, Ready: (i * 37) % 1400, QueueCapacity: 2000,
			UpdatedAt: published.Add(-time.Duration(i%10) * time.Second), RegionHealthy: i%50 != 7,
		}
		price := r.price
		if copyNo%2 == 1 && r.spot > 0 {
			price, p.Spot = r.spot, true
		}
		if r.accelerator != "" {
			p.Tags["class"], p.Tags["gpu"] = "gpu", r.accelerator
			p.PricePerSlotHour = price
		} else {
			p.PricePerSlotHour = price / r.vcpus
		}
		p.PricePerSlotHour *= 1 + float64(i%17)/1000 // few exact ties
		if i%97 == 0 {
			p.UpdatedAt = published.Add(-time.Minute)
		}
		pools[i] = p
	}
	return pools
}

var benchTypes = []string{"etl", "thumbnail", "train", "infer", "report", "backup", "index", "render"}

func benchTasks() []Task {
	cpu := map[string]string{"class": "cpu"}
	return []Task{
		{Type: "etl", Tags: cpu},
		{Type: "thumbnail", Tags: map[string]string{"class": "cpu", "vcpus": "16"}},
		{Type: "train", Tags: map[string]string{"class": "gpu"}},
		{Type: "infer", Tags: map[string]string{"gpu": "A100"}, Home: "us-central1"},
		{Type: "report", Tags: map[string]string{"provider": "aws"}, Regions: []string{"us-east-1", "eu-west-1-1", "ap-northeast-1"}},
		{Type: "backup"},
		{Type: "index", Tags: cpu, Critical: true},
		{Type: "render", Tags: map[string]string{"provider": "gcp", "class": "cpu"}, Home: "europe-west4"},
		{Type: "etl", Tags: cpu, Home: "eu-west-1"},
		{Type: "train", Tags: map[string]string{"gpu": "L4"}, Regions: []string{"us-east-1", "ap-northeast-1"}},
		{Type: "report", Tags: map[string]string{"provider": "azure", "vcpus": "4"}},
		{Type: "backup", Tags: cpu, Regions: []string{"eastus", "westus2", "southcentralus"}},
		{Type: "index", Tags: map[string]string{"class": "cpu", "vcpus": "4"}},
		{Type: "render", Tags: map[string]string{"class": "gpu"}, Home: "us-east-1"},
		{Type: "etl", Tags: map[string]string{"provider": "gcp"}},
		{Type: "thumbnail", Tags: cpu, Critical: true, Home: "asia-northeast1"},
	}
}

// benchEstimator knows every (type, pool) pair, ±30 % around a per-type duration.
func benchEstimator(tb testing.TB, cfg Config, pools []Pool) *Estimator {
	est := mustEstimator(tb, cfg)
	for ti, typ := range benchTypes {
		base := time.Duration(30*(ti+1)) * time.Second
		for i, p := range pools {
			est.Observe("", typ, p.Key(), base*time.Duration(70+(i*31+ti*17)%61)/100)
		}
	}
	return est
}

var sinkDecision Decision

// BenchmarkPlace measures Place on a cached snapshot. Pools publish new figures every
// republishEvery decisions (a new Snapshot, built outside the timer, each pool's UpdatedAt one
// second later), so damping counts reset as they would in production instead of saturating every
// pool; the Placer's switch to the new snapshot is inside the timer.
func BenchmarkPlace(b *testing.B) {
	const republishEvery, snapshots = 8192, 32
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Servers = 4
			cfg.CrossRegionPenalty = 0.0005
			snaps := make([]*Snapshot, snapshots)
			for j := range snaps {
				snaps[j] = mustSnapshot(b, benchPools(b, n, t0.Add(time.Duration(j)*time.Second))...)
			}
			est := benchEstimator(b, cfg, benchPools(b, n, t0))
			tasks := benchTasks()
			p := mustPlacer(b, cfg, est)
			j, s, now := 0, snaps[0], t0
			placed := 0
			b.ReportAllocs()
			cpu0, cpuOK := processCPU()
			b.ResetTimer()
			for i := range b.N {
				if i > 0 && i%republishEvery == 0 {
					if j++; j == len(snaps) {
						b.StopTimer()
						j, p = 0, mustPlacer(b, cfg, est) // UpdatedAt wraps back: start afresh
						b.StartTimer()
					}
					s, now = snaps[j], t0.Add(time.Duration(j)*time.Second)
				}
				sinkDecision = p.Place(s, tasks[i%len(tasks)], now)
				if sinkDecision.OK {
					placed++
				}
			}
			b.StopTimer()
			if cpu1, ok := processCPU(); ok && cpuOK {
				b.ReportMetric(float64(cpu1-cpu0)/float64(b.N), "cpu-ns/op")
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
			b.ReportMetric(float64(placed)/float64(b.N), "ok/op")
		})
	}
}

var sinkExplanation Explanation

func BenchmarkExplain(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("pools=%d", n), func(b *testing.B) {
			cfg := DefaultConfig()
			pools := benchPools(b, n, t0)
			s := mustSnapshot(b, pools...)
			p := mustPlacer(b, cfg, benchEstimator(b, cfg, pools))
			tasks := benchTasks()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				sinkExplanation = p.Explain(s, tasks[i%len(tasks)], t0)
			}
		})
	}
}

func BenchmarkNewSnapshot(b *testing.B) {
	pools := benchPools(b, 1000, t0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewSnapshot(DefaultConfig(), pools); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlaceTied is the walk's worst shape: 1000 pools alike in price, fill and duration, no
// tags. Ties go to the first pool in snapshot order, so the walk still stops after one pool.
func BenchmarkPlaceTied(b *testing.B) {
	pools := make([]Pool, 1000)
	for i := range pools {
		pools[i] = Pool{
			Region: fmt.Sprintf("r%02d", i%30), Name: fmt.Sprintf("p%d", i), Slots: 64, QueueCapacity: 1 << 30,
			PricePerSlotHour: 0.048, UpdatedAt: t0, RegionHealthy: true, // m6i.xlarge ÷ 4 vCPUs
		}
	}
	s := mustSnapshot(b, pools...)
	p := mustPlacer(b, DefaultConfig(), nil)
	b.ReportAllocs()
	for b.Loop() {
		sinkDecision = p.Place(s, Task{Type: "etl"}, t0)
	}
}
