package placement

import (
	"encoding/csv"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Prices in the fixtures come from testdata/prices.csv, a copy of /work/shared/data/prices.csv
// (AWS, GCP and Azure list and spot prices from github.com/skypilot-org/skypilot-catalog; see that
// folder's README for commits and caveats). A CPU pool's slot is one vCPU, so its price per
// slot-hour is the VM's hourly price ÷ its vCPUs; a GPU pool's slot is the single-GPU VM.

type priceRow struct {
	provider, region, instance, accelerator string
	vcpus, price, spot                      float64
}

var (
	pricesOnce sync.Once
	priceRows  []priceRow
	pricesErr  error
)

func prices(tb testing.TB) []priceRow {
	tb.Helper()
	pricesOnce.Do(func() {
		f, err := os.Open("testdata/prices.csv")
		if err != nil {
			pricesErr = err
			return
		}
		defer f.Close()
		recs, err := csv.NewReader(f).ReadAll()
		if err != nil {
			pricesErr = err
			return
		}
		num := func(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
		for _, r := range recs[1:] {
			// provider,region,zone,instance_type,vcpus,memory_gib,accelerator,accelerator_count,
			// price_per_hour,spot_price_per_hour,source_file
			priceRows = append(priceRows, priceRow{
				provider: r[0], region: r[1], instance: r[3], accelerator: r[6],
				vcpus: num(r[4]), price: num(r[8]), spot: num(r[9]),
			})
		}
	})
	if pricesErr != nil {
		tb.Fatalf("reading prices: %v", pricesErr)
	}
	return priceRows
}

func priceOf(tb testing.TB, provider, region, instance string) priceRow {
	tb.Helper()
	for _, r := range prices(tb) {
		if r.provider == provider && r.region == region && r.instance == instance {
			return r
		}
	}
	tb.Fatalf("no price for %s %s %s", provider, region, instance)
	return priceRow{}
}

// t0 is the fixtures' "now": figures are published a second before it.
var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// cpuPool is a healthy, fresh, half-busy CPU pool named after its instance type, priced per vCPU.
func cpuPool(tb testing.TB, provider, region, instance string) Pool {
	tb.Helper()
	r := priceOf(tb, provider, region, instance)
	return Pool{
		Region: region, Name: instance,
		Tags:  map[string]string{"class": "cpu", "arch": "amd64"},
		Slots: 100, Running: 50, QueueCapacity: 1000,
		PricePerSlotHour: r.price / r.vcpus,
		UpdatedAt:        t0.Add(-time.Second), RegionHealthy: true,
	}
}

// gpuPool is a healthy, fresh single-GPU pool: one slot per VM, tagged with its accelerator.
func gpuPool(tb testing.TB, provider, region, instance string) Pool {
	tb.Helper()
	r := priceOf(tb, provider, region, instance)
	return Pool{
		Region: region, Name: instance,
		Tags:  map[string]string{"class": "gpu", "gpu": r.accelerator},
		Slots: 8, Running: 4, QueueCapacity: 64,
		PricePerSlotHour: r.price,
		UpdatedAt:        t0.Add(-time.Second), RegionHealthy: true,
	}
}

func with(p Pool, f func(*Pool)) Pool {
	f(&p)
	return p
}

func mustSnapshot(tb testing.TB, pools ...Pool) *Snapshot {
	tb.Helper()
	s, err := NewSnapshot(DefaultConfig(), pools)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func mustPlacer(tb testing.TB, cfg Config, est *Estimator) *Placer {
	tb.Helper()
	p, err := NewPlacer(cfg, est)
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

func mustEstimator(tb testing.TB, cfg Config) *Estimator {
	tb.Helper()
	e, err := NewEstimator(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func cpuTask() Task { return Task{Type: "etl", Tags: map[string]string{"class": "cpu"}} }

func key(d Decision) string {
	if !d.OK {
		return "-"
	}
	return d.Region + "/" + d.Pool
}
