package store_test

import (
	"context"
	"errors"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
)

// TestQuotaIsSharedByTheServersOfARegion: two stores on one Redis (two
// servers of a region) take from one bucket per tenant, so together they
// grant the tenant's rate, not twice it; tenants have buckets of their
// own; the refusal says how long to wait.
func TestQuotaIsSharedByTheServersOfARegion(t *testing.T) {
	e := newEnv(t)
	other, err := newStages(e.rdb, e.s.Options())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	taken := 0
	var wg sync.WaitGroup
	for i := range 20 {
		s := e.s
		if i%2 == 1 {
			s = other
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, _, err := s.TakeQuota(e.ctx, "acme", 1, 5, 1)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if taken != 5 {
		t.Fatalf("two servers granted %d of 20 at once, want the burst (5)", taken)
	}
	ok, wait, err := other.TakeQuota(e.ctx, "acme", 1, 5, 2)
	if err != nil || ok || wait != 2*time.Second {
		t.Fatalf("empty bucket, 2 asked: %v %v %v, want refused with 2s to wait", ok, wait, err)
	}
	if ok, _, err := e.s.TakeQuota(e.ctx, "other", 1, 5, 5); err != nil || !ok {
		t.Fatalf("another tenant: %v %v, want its own bucket", ok, err)
	}
	e.clock.Advance(2500 * time.Millisecond)
	for i, want := range []bool{true, true, false} {
		if ok, _, err := other.TakeQuota(e.ctx, "acme", 1, 5, 1); err != nil || ok != want {
			t.Fatalf("after 2.5 s, take %d: %v %v, want %v (2 refilled)", i, ok, err, want)
		}
	}
	e.clock.Advance(time.Hour)
	if ok, _, err := e.s.TakeQuota(e.ctx, "acme", 1, 5, 6); err != nil || ok {
		t.Fatalf("6 from a full bucket of 5: %v %v, want refused", ok, err)
	}
	if ok, _, err := e.s.TakeQuota(e.ctx, "acme", 1, 5, 5); err != nil || !ok {
		t.Fatalf("5 from a full bucket of 5: %v %v", ok, err)
	}
}

// BenchmarkTakeQuota is the cost a quota adds to a submit: one script
// call on the region's Redis (docs/benchmarks.md), beside a submit's, each
// with the Redis time of its script (INFO commandstats, redis-µs/op). The
// bucket never runs dry, so every call takes and writes.
func BenchmarkTakeQuota(b *testing.B) {
	for _, c := range []struct {
		name string
		op   func(*stageSet, context.Context) error
	}{
		{"quota", func(s *stageSet, ctx context.Context) error {
			ok, _, err := s.TakeQuota(ctx, "acme", 1e9, 1000, 1)
			if err == nil && !ok {
				err = errors.New("refused")
			}
			return err
		}},
		{"submit", func(s *stageSet, ctx context.Context) error {
			_, err := s.Submit(ctx, queue.NewTask{Spec: benchSpec(b), Pool: "cpu"})
			return err
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, ctx, r := benchStore(b)
			if err := c.op(s, ctx); err != nil { // loads the script
				b.Fatal(err)
			}
			if err := r.Client().ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.op(s, ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			info, err := r.Client().Info(ctx, "commandstats").Result()
			if err != nil {
				b.Fatal(err)
			}
			if m := regexp.MustCompile(`cmdstat_evalsha:calls=(\d+),usec=(\d+)`).FindStringSubmatch(info); m != nil {
				calls, _ := strconv.ParseFloat(m[1], 64)
				usec, _ := strconv.ParseFloat(m[2], 64)
				b.ReportMetric(usec/calls, "redis-µs/op")
			}
		})
	}
}
