package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/fedtest"
)

// TestSubmitProfile is a measurement, not a check: with AX_SUBMIT_N=<tasks>
// it sends that many single POST /v1/tasks (64 B payload, auth on) over 16
// keep-alive connections to one region's API of the in-process federation,
// for a CPU profile of the submit path without process or network noise:
//
//	AX_SUBMIT_N=20000 go test -run TestSubmitProfile -v -cpuprofile cpu.prof ./httpapi/
//	go tool pprof -top -cum httpapi.test cpu.prof
//
// (docs/benchmarks.md, "Where a single submit's server time goes").
func TestSubmitProfile(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("AX_SUBMIT_N"))
	if n <= 0 {
		t.Skip("set AX_SUBMIT_N=<tasks> to profile single submits through the API")
	}
	f := newFed(t, fedtest.WithCapacity(aws, poolSpot, 10_000_000), fedtest.WithCapacity(aws, poolCPU, 10_000_000))
	url := f.R(aws).URL() + "/v1/tasks"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	var next, bad atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1); i <= int64(n); i = next.Add(1) {
				body := fmt.Sprintf(`{"type":"bench.noop","tags":{"arch":"x86"},"regions":[%q],"payload":{"k":"%058d"}}`, aws, i)
				req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tokAcme)
				resp, err := client.Do(req)
				if err != nil {
					bad.Add(1)
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 && bad.Add(1) == 1 {
					t.Logf("first refusal: %d %s", resp.StatusCode, b)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	t.Logf("%d single submits in %v: %.0f/s, %d not accepted", n, took.Round(time.Millisecond), float64(n)/took.Seconds(), bad.Load())
	if bad.Load() > 0 {
		t.Errorf("%d of %d submits not accepted", bad.Load(), n)
	}
}
