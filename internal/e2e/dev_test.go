package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/internal/testenv"
)

// devProc is one `ax dev` process a test runs.
type devProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	log   lockedBuffer
	done  chan struct{} // closed once ax dev has been reaped
	api   string        // us-east-1's API
	token string        // the admin token of an ax dev with auth on
}

// startDev runs `ax dev --port 0 <args>` and waits until its three regions
// are healthy with workers (healthy only, with --no-demo-workers). --port 0: ax dev binds three free ports itself
// before it starts its Redis and etcd children, and prints them; a port
// chosen here could be taken by another test's process before ax dev binds
// it.
func startDev(t *testing.T, args ...string) *devProc {
	t.Helper()
	return launchDev(t, nil, append([]string{"--port", "0"}, args...)...)
}

// launchDev runs `ax dev <args>` with env added to the test's environment
// and waits as startDev does; with auth on (the banner's AX_TOKEN) its
// readiness checks send the token.
func launchDev(t *testing.T, env []string, args ...string) *devProc {
	t.Helper()
	d := &devProc{t: t, done: make(chan struct{})}
	d.cmd = exec.Command(axBin, append([]string{"dev"}, args...)...)
	d.cmd.Stdout, d.cmd.Stderr = &d.log, &d.log
	d.cmd.Env = append(append(os.Environ(), "AX_LOG_FORMAT=text"), env...)
	dieWithTest(d.cmd, false)
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	t.Cleanup(d.kill)
	waitUntil(t, 60*time.Second, "ax dev to print its API address", func() bool {
		if m := devAPI.FindStringSubmatch(d.log.String()); m != nil {
			d.api = m[1]
			return true
		}
		select {
		case <-d.done:
			t.Fatalf("ax dev exited before it was running (%v):\n%s", d.cmd.ProcessState, tail(d.log.String(), 3000))
		default:
		}
		return false
	})
	waitUntil(t, 60*time.Second, "ax dev /readyz", func() bool {
		resp, err := http.Get(d.api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	if m := devToken.FindStringSubmatch(d.log.String()); m != nil {
		d.token = m[1]
	}
	demo := !slices.Contains(args, "--no-demo-workers")
	waitUntil(t, 30*time.Second, "three healthy regions", func() bool {
		var r struct {
			Regions []struct {
				Name    string `json:"name"`
				Healthy bool   `json:"healthy"`
				Pools   []struct {
					Slots int `json:"slots"`
				} `json:"pools"`
			} `json:"regions"`
		}
		if getJSONAuth(d.api+"/v1/regions", d.token, &r) != nil || len(r.Regions) != 3 {
			return false
		}
		for _, g := range r.Regions {
			if !g.Healthy || len(g.Pools) == 0 || (demo && g.Pools[0].Slots == 0) {
				return false
			}
		}
		return true
	})
	return d
}

// interrupt stops ax dev as Ctrl-C does and checks it stopped cleanly and
// left no child process running.
func (d *devProc) interrupt() {
	d.t.Helper()
	kids := children(d.cmd.Process.Pid)
	d.t.Logf("ax dev children before SIGINT: %v", kids)
	_ = d.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		d.t.Fatal("ax dev did not stop within 30 s of SIGINT")
	}
	for _, k := range kids {
		if alive(k) {
			d.t.Fatalf("child %d of ax dev still runs after it stopped", k)
		}
	}
	if !strings.Contains(d.log.String(), "ax dev stopped.") {
		d.t.Fatalf("ax dev did not report a clean stop:\n%s", tail(d.log.String(), 3000))
	}
}

func (d *devProc) kill() {
	if d.t.Failed() {
		d.t.Logf("ax dev log:\n%s", tail(d.log.String(), 4000))
	}
	select {
	case <-d.done:
	default:
		_ = d.cmd.Process.Kill()
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			d.t.Errorf("ax dev (pid %d) still not reaped after SIGKILL", d.cmd.Process.Pid)
		}
	}
}

// submitBatch submits n noop tasks to region in batches of 1000 and
// returns their ids. Items refused as saturated (admission control while
// the region's queue is deep) are sent again after a pause, as a client
// honouring 429 would.
func (d *devProc) submitBatch(region string, n int) []string {
	d.t.Helper()
	return d.submitItems(fmt.Sprintf(`{"type":"noop","regions":[%q],"tags":{"cpu":"x86"}}`, region), n)
}

// submitItems submits n copies of the spec item in batches of 1000, as
// submitBatch.
func (d *devProc) submitItems(item string, n int) []string {
	d.t.Helper()
	var ids []string
	deadline := time.Now().Add(90 * time.Second)
	for len(ids) < n {
		if time.Now().After(deadline) {
			d.t.Fatalf("batch submit: %d of %d accepted within 90 s", len(ids), n)
		}
		k := min(1000, n-len(ids))
		body := `{"tasks":[` + strings.TrimSuffix(strings.Repeat(item+",", k), ",") + `]}`
		resp, err := http.Post(d.api+"/v1/tasks/batch", "application/json", strings.NewReader(body))
		if err != nil {
			d.t.Fatal(err)
		}
		var r struct {
			Results []struct {
				Task *struct {
					ID string `json:"id"`
				} `json:"task"`
				Error *struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			} `json:"results"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(r.Results) != k {
			d.t.Fatalf("batch submit: status %d, %d results for %d tasks, %v", resp.StatusCode, len(r.Results), k, err)
		}
		saturated := false
		for _, it := range r.Results {
			switch {
			case it.Task != nil:
				ids = append(ids, it.Task.ID)
			case it.Error != nil && it.Error.Code == "saturated":
				saturated = true
			default:
				d.t.Fatalf("batch submit: item refused: %+v", it.Error)
			}
		}
		if saturated {
			time.Sleep(200 * time.Millisecond)
		}
	}
	return ids
}

// waitSuccess waits until every task in ids is SUCCESS.
func (d *devProc) waitSuccess(within time.Duration, ids []string) {
	d.t.Helper()
	left := ids
	waitUntil(d.t, within, fmt.Sprintf("%d tasks SUCCESS", len(ids)), func() bool {
		for len(left) > 0 {
			var tk struct {
				State string `json:"state"`
			}
			if getJSON(d.api+"/v1/tasks/"+left[0], &tk) != nil || tk.State != "SUCCESS" {
				return false
			}
			left = left[1:]
		}
		return true
	})
}

// `ax dev`: start it, wait for /readyz, submit 100 tasks of two tenants
// across the three regions (two thirds handed off from us-east-1's API),
// all SUCCESS; `ax cost` shows their spend and savings per tenant, pool
// and the region that ran them; stop it with SIGINT, and no child process
// is left.
func TestDevSmoke(t *testing.T) {
	d := startDev(t, "--tmp")
	d.checkHints()
	// SIGHUP reloads as in ax server and never ends ax dev: everything
	// below runs after it.
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "ax dev to handle SIGHUP", func() bool {
		return strings.Count(d.log.String(), "SIGHUP: API tokens") == 3
	})
	regions := []string{"us-east-1", "europe-west4", "eastus"}
	var ids []string
	for i := 0; i < 100; i++ {
		body := fmt.Sprintf(`{"type":"sleep","payload":{"ms":20},"tenant":"team-%c","regions":[%q],"tags":{"cpu":"x86"}}`,
			'a'+i%2, regions[i%3])
		resp, err := http.Post(d.api+"/v1/tasks", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			ID     string `json:"id"`
			Region string `json:"region"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if resp.StatusCode != 201 || r.ID == "" {
			t.Fatalf("submit %d: status %d", i, resp.StatusCode)
		}
		if r.Region != regions[i%3] {
			t.Fatalf("task placed in %s, want %s", r.Region, regions[i%3])
		}
		ids = append(ids, r.ID)
	}
	d.waitSuccess(60*time.Second, ids)
	// Each demo worker offers at most its pool's slots (eastus's gpu-a100
	// has 2; the workers' default is 4).
	if strings.Contains(d.log.String(), "more slots than configured") {
		t.Errorf("a demo worker offers more slots than its pool has:\n%s", tail(d.log.String(), 3000))
	}
	d.checkMetrics(map[string]float64{"us-east-1": 34, "europe-west4": 33, "eastus": 33})
	d.checkCost(map[string]int64{"us-east-1": 34, "europe-west4": 33, "eastus": 33})
	d.checkHeadlessScreenshots(ids[0])
	d.interrupt()
}

// checkHeadlessScreenshots takes the README's headless screenshot of the
// dashboard's two live pages, the overview and a task's page, with
// ?live=0: each settles within its virtual time budget and leaves a PNG
// (with the event stream open the budget never ran out and Chromium
// never returned).
func (d *devProc) checkHeadlessScreenshots(id string) {
	d.t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		d.t.Fatal("chromium is not installed (make deps installs it: apt-get install chromium)")
	}
	for _, page := range []string{"#/", "#/task/" + id} {
		png := filepath.Join(d.t.TempDir(), "shot.png")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
			"--user-data-dir="+d.t.TempDir(), "--window-size=1280,900", "--virtual-time-budget=3000",
			"--screenshot="+png, d.api+"/?live=0"+page)
		out, err := cmd.CombinedOutput()
		late := ctx.Err() != nil
		cancel()
		if late {
			d.t.Fatalf("headless screenshot of %s did not finish within 60 s (the page never settled):\n%s", page, tail(string(out), 2000))
		}
		b, rerr := os.ReadFile(png)
		if err != nil || rerr != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) || len(b) < 10000 {
			d.t.Fatalf("headless screenshot of %s: %v, %v, %d bytes:\n%s", page, err, rerr, len(b), tail(string(out), 2000))
		}
	}
}

// checkHints checks the commands ax dev prints under "Try next": on
// --port 0 they must name the API ax dev picked, not the CLI's default
// :8080 (they did not); the read-only ones run as printed (go run ./cmd/ax
// is the built binary).
func (d *devProc) checkHints() {
	d.t.Helper()
	hints := regexp.MustCompile(`(?m)^  go run \./cmd/ax (.+)$`).FindAllStringSubmatch(d.log.String(), -1)
	if len(hints) != 3 {
		d.t.Fatalf("ax dev printed %d commands to try, want 3:\n%s", len(hints), tail(d.log.String(), 3000))
	}
	for _, h := range hints {
		if !strings.Contains(h[1], "--api "+d.api+" ") {
			d.t.Errorf("ax dev's hint %q does not name its API %s", h[1], d.api)
		}
		if strings.Contains(" "+h[1], " submit ") {
			continue // the smoke test counts its own submits
		}
		cmd := exec.Command(axBin, append([]string{"--settings", ""}, strings.Fields(h[1])...)...)
		var env []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "AX_") {
				env = append(env, kv)
			}
		}
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "us-east-1") {
			d.t.Errorf("ax dev's hint %q: %v\n%s", h[1], err, out)
		}
	}
}

// checkCost reads `ax cost` by tenant, pool and region after TestDevSmoke's
// workload: every region's spot pool ran its tasks (handed-off ones counted
// where they ran), each at its spot price × run time, and saved against
// the cheapest on-demand pool with cpu=x86 ($0.048 per slot-hour).
func (d *devProc) checkCost(ran map[string]int64) {
	d.t.Helper()
	spot := map[string]float64{"us-east-1": 0.01700625, "europe-west4": 0.017718125, "eastus": 0.00528}
	var rep struct {
		Rows []struct {
			Tenant, Pool, Region string
			R                    int64   `json:"runs"`
			S                    int64   `json:"spot_runs"`
			RunSeconds           float64 `json:"run_seconds"`
			Spend                float64 `json:"spend_usd"`
			Reference            float64 `json:"reference_usd"`
			Savings              float64 `json:"savings_usd"`
		} `json:"rows"`
		Unavailable []string `json:"unavailable"`
	}
	out, errOut, code := runAx(d.t, d.api, "cost", "--group-by", "tenant,pool,region", "-o", "json")
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Unavailable) != 0 {
		d.t.Fatalf("ax cost -o json: exit %d, %s\n%s", code, errOut, out)
	}
	got := map[string]int64{}
	tenants := map[string]bool{}
	for _, r := range rep.Rows {
		if r.Pool != "cpu-spot" || r.S != r.R || r.RunSeconds < 0.02*float64(r.R) {
			d.t.Errorf("row %+v: want spot runs of ≥ 20 ms each", r)
		}
		if want := spot[r.Region] * r.RunSeconds / 3600; r.Spend < want*0.999 || r.Spend > want*1.001 {
			d.t.Errorf("row %+v: spend, want %g", r, want)
		}
		if want := 0.048 * r.RunSeconds / 3600; r.Reference < want*0.999 || r.Reference > want*1.001 || r.Savings <= 0 {
			d.t.Errorf("row %+v: reference and savings, want %g", r, want)
		}
		got[r.Region] += r.R
		tenants[r.Tenant] = true
	}
	if fmt.Sprint(got) != fmt.Sprint(ran) || !tenants["team-a"] || !tenants["team-b"] {
		d.t.Fatalf("ax cost: runs by region %v (want %v), tenants %v:\n%s", got, ran, tenants, out)
	}
	out, _, code = runAx(d.t, d.api, "cost")
	if code != 0 || !strings.Contains(out, "team-a") || !strings.Contains(out, "cpu-spot") || !strings.Contains(out, "TOTAL") ||
		!strings.Contains(out, "SAVINGS") {
		d.t.Fatalf("ax cost: exit %d\n%s", code, out)
	}
	d.t.Logf("ax cost:\n%s", out)
}

// checkMetrics checks that each region's /metrics exports its own series
// only (so sums over the endpoints count each event once): no series names
// another region, the
// submits are counted once (all went to us-east-1's API), and each
// region's workers' successes appear on its own endpoint, as ran[region].
func (d *devProc) checkMetrics(ran map[string]float64) {
	d.t.Helper()
	apis := map[string]string{}
	for _, m := range devAPIs.FindAllStringSubmatch(d.log.String(), -1) {
		apis[m[1]] = m[2]
	}
	if len(apis) != len(ran) {
		d.t.Fatalf("ax dev printed the APIs of %v, want %d regions", apis, len(ran))
	}
	total := 0.0
	for _, n := range ran {
		total += n
	}
	submitted := 0.0
	for region, api := range apis {
		// Successes are counted as the workers record them, just after
		// the task reads SUCCESS.
		var body string
		waitUntil(d.t, 10*time.Second, region+"'s successes on its own /metrics", func() bool {
			body = scrape(d.t, api+"/metrics")
			v, _ := sum(body, "ax_tasks_finished_total", map[string]string{"state": "SUCCESS"})
			return v >= ran[region]
		})
		if bad := foreignRegions(body, region); len(bad) > 0 {
			d.t.Errorf("%s's /metrics exports other regions' series: %v", region, bad)
		}
		if v, _ := sum(body, "ax_tasks_finished_total", map[string]string{"state": "SUCCESS"}); v != ran[region] {
			d.t.Errorf("%s's /metrics: %v successes, want %v", region, v, ran[region])
		}
		if _, ok := sum(body, "ax_task_schedule_latency_seconds_count", map[string]string{"region": region}); !ok {
			d.t.Errorf("%s's /metrics has no schedule latency of its workers", region)
		}
		v, _ := sum(body, "ax_tasks_submitted_total", nil)
		submitted += v
	}
	if submitted != total {
		d.t.Errorf("ax_tasks_submitted_total summed over the endpoints = %v, want %v (each submit once)", submitted, total)
	}
}

// `ax dev` restarts on its own state, even while its Redis is still loading
// a large dataset: a run with 25 k tasks, Ctrl-C, a second run on the same
// --dir comes up, still knows
// the first run's tasks and runs new ones. The 25 k are due in an hour (the
// dataset is as large as 25 k finished ones, without the half minute a
// drain of them takes); 500 run to SUCCESS before the restart.
func TestDevRestartOnState(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, "--dir", dir)
	later := d.submitItems(`{"type":"noop","delay":"1h","regions":["us-east-1"],"tags":{"cpu":"x86"}}`, 25_000)
	ran := d.submitBatch("us-east-1", 500)
	d.waitSuccess(60*time.Second, ran)
	var sample []string // every 250th: a GET each, after the restart
	for i := 0; i < len(later); i += 250 {
		sample = append(sample, later[i])
	}
	sample = append(sample, later[len(later)-1])
	d.interrupt()

	d2 := startDev(t, "--dir", dir)
	d2.waitSuccess(10*time.Second, ran) // the first run's tasks are still there
	for _, id := range sample {
		var tk struct {
			State string `json:"state"`
		}
		if err := getJSON(d2.api+"/v1/tasks/"+id, &tk); err != nil || tk.State != "PENDING" {
			t.Fatalf("task %s due in an hour after the restart: state %q, %v; want PENDING", id, tk.State, err)
		}
	}
	d2.waitSuccess(60*time.Second, d2.submitBatch("us-east-1", 100))
	d2.interrupt()
}

// devAPI finds the first region's API in ax dev's banner.
var devAPI = regexp.MustCompile(`us-east-1\s+API (http://127\.0\.0\.1:\d+)`)

// devToken finds the admin token in the banner of an ax dev with auth on.
var devToken = regexp.MustCompile(`(?m)^  export AX_TOKEN=([0-9a-f]+)$`)

// devAPIs finds every region's API in ax dev's banner.
var devAPIs = regexp.MustCompile(`(?m)^\s+(\S+)\s+API (http://127\.0\.0\.1:\d+)`)

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func getJSON(url string, v any) error { return getJSONAuth(url, "", v) }

// getJSONAuth is getJSON with a bearer token (none when empty).
func getJSONAuth(url, token string, v any) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// The burst: specs pinned to one region, sent in batches of 1 000 to one
// server while ax dev runs three. Damping only spreads choices, it refuses
// nothing: the region's Redis admits each task
// against its pool's real READY count (⌊10 000 × 0.80⌋ at most), a task
// the store refuses spills to the next pool, and nothing is refused while
// either pool has room. The tasks sleep a minute, so no worker drains the
// queue while it fills.
//
// Fill before spill: below its spill watermark (0.80) a pool scores at its
// price, so the spot pool takes every task until its READY count reaches
// ⌊10 000 × 0.80⌋ = 8 000 (plus what its workers hold running), and only
// then do tasks go to on-demand.
func TestDevBurstFillsBeforeSpilling(t *testing.T) {
	testenv.Slow(t)
	d := startDev(t, "--tmp")
	const n = 12000
	item := `{"type":"sleep","payload":{"ms":60000},"regions":["us-east-1"],"tags":{"cpu":"x86"}}`
	pools := map[string]int{}
	firstSpill := -1
	for sent := 0; sent < n; sent += 1000 {
		body := `{"tasks":[` + strings.TrimSuffix(strings.Repeat(item+",", 1000), ",") + `]}`
		resp, err := http.Post(d.api+"/v1/tasks/batch", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Results []struct {
				Task *struct {
					Pool string `json:"pool"`
				} `json:"task"`
				Error *struct {
					Code    string `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			} `json:"results"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(r.Results) != 1000 {
			t.Fatalf("batch: status %d, %d results, %v", resp.StatusCode, len(r.Results), err)
		}
		for k, it := range r.Results {
			if it.Error != nil || it.Task == nil {
				t.Fatalf("item %d refused with %d in cpu-spot, %d in cpu-ondemand: %+v", sent+k, pools["cpu-spot"], pools["cpu-ondemand"], it.Error)
			}
			pools[it.Task.Pool]++
			if it.Task.Pool != "cpu-spot" && firstSpill < 0 {
				firstSpill = sent + k
			}
		}
	}
	t.Logf("placed: %v; first task placed off cpu-spot: #%d", pools, firstSpill)
	// Every task accepted while either pool had room (checked above: the
	// two hold 16 000 below their spill watermarks), none past the spot
	// pool's admission limit (8 000 READY, plus at most its 32 slots
	// running).
	const watermark, slots = 8000, 32
	if pools["cpu-spot"] > watermark*101/100+slots || pools["cpu-spot"]+pools["cpu-ondemand"] != n || firstSpill < 0 {
		t.Fatalf("placed %v, first spill at #%d", pools, firstSpill)
	}
	// The first spill within 1 % of the spill watermark (plus the tasks
	// the spot pool's workers hold running), and the spot pool kept it.
	if firstSpill < watermark*99/100 || firstSpill > watermark*101/100+slots {
		t.Fatalf("first spill at #%d, want the spot pool filled to its spill watermark, %d READY, first (±1 %%)", firstSpill, watermark)
	}
	if pools["cpu-spot"] < watermark*99/100 {
		t.Fatalf("placed %v: the spot pool holds less than its spill watermark (%d)", pools, watermark)
	}
}
