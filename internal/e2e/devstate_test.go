package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// devEtcd finds the embedded etcd's client URL in ax dev's banner.
var devEtcd = regexp.MustCompile(`etcd\s+(http://127\.0\.0\.1:\d+) \(embedded\)`)

// etcdURL is the etcd this ax dev run started.
func (d *devProc) etcdURL() string {
	d.t.Helper()
	m := devEtcd.FindStringSubmatch(d.log.String())
	if m == nil {
		d.t.Fatalf("no etcd in ax dev's banner:\n%s", tail(d.log.String(), 3000))
	}
	return m[1]
}

// etcdDo runs f against this ax dev's embedded etcd.
func (d *devProc) etcdDo(f func(context.Context, *clientv3.Client) error) {
	d.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{d.etcdURL()}, DialTimeout: 5 * time.Second})
	if err != nil {
		d.t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f(ctx, cli); err != nil {
		d.t.Fatal(err)
	}
}

// lastFired is the schedule's last fired slot, zero before its first.
func (d *devProc) lastFired(name string) time.Time {
	d.t.Helper()
	out, errb, code := runAx(d.t, d.api, "schedule", "get", name, "-o", "json")
	if code != 0 {
		d.t.Fatalf("ax schedule get %s: exit %d: %s", name, code, errb)
	}
	var s struct {
		LastFiredSlot *time.Time `json:"last_fired_slot"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		d.t.Fatalf("ax schedule get %s -o json: %v\n%s", name, err, out)
	}
	if s.LastFiredSlot == nil {
		return time.Time{}
	}
	return *s.LastFiredSlot
}

// `ax dev` keeps its etcd state across Ctrl-C and a new start in the same
// --dir: a schedule (still listed, still firing), a live price override
// and a fair-share override; the new run's leaders take over without a
// fenced write rejected (its revisions, the fencing tokens, carry on above
// the first run's, which its Redis stores).
func TestDevRestartKeepsSchedulesAndOverrides(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, "--dir", dir)
	spec := filepath.Join(t.TempDir(), "schedule.json")
	if err := os.WriteFile(spec, []byte(`{"name":"every-second","cron":"* * * * * *",
		"task":{"type":"noop","regions":["us-east-1"],"tags":{"cpu":"x86"}},"home_region":"us-east-1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errb, code := runAx(t, d.api, "schedule", "create", "-f", spec); code != 0 {
		t.Fatalf("ax schedule create: exit %d: %s%s", code, out, errb)
	}
	const price, share = `{"price_per_slot_hour": 0.02}`, `{"tenants": {"team-a": {"weight": 3}}}`
	d.etcdDo(func(ctx context.Context, c *clientv3.Client) error {
		if _, err := c.Put(ctx, "/ax/prices/us-east-1/cpu", price); err != nil {
			return err
		}
		_, err := c.Put(ctx, "/ax/fairshare/us-east-1/cpu", share)
		return err
	})
	waitUntil(t, 30*time.Second, "the schedule to fire", func() bool { return !d.lastFired("every-second").IsZero() })
	d.interrupt()

	d2 := startDev(t, "--dir", dir)
	if out, errb, code := runAx(t, d2.api, "schedule", "list"); code != 0 || !strings.Contains(out, "every-second") {
		t.Fatalf("ax schedule list after the restart: exit %d, no every-second:\n%s%s", code, out, errb)
	}
	d2.etcdDo(func(ctx context.Context, c *clientv3.Client) error {
		for key, want := range map[string]string{"/ax/prices/us-east-1/cpu": price, "/ax/fairshare/us-east-1/cpu": share} {
			r, err := c.Get(ctx, key)
			if err != nil {
				return err
			}
			if len(r.Kvs) != 1 || string(r.Kvs[0].Value) != want {
				t.Errorf("%s after the restart: %v, want %s", key, r.Kvs, want)
			}
		}
		return nil
	})
	restarted := time.Now().UTC().Truncate(time.Second)
	waitUntil(t, 30*time.Second, "the schedule to fire after the restart", func() bool {
		return d2.lastFired("every-second").After(restarted)
	})
	if strings.Contains(d2.log.String(), "fenced write rejected") {
		t.Errorf("a fenced write was rejected after a clean restart:\n%s", tail(d2.log.String(), 3000))
	}
	d2.interrupt()
}

// A second `ax dev` in a directory one is running in exits at once,
// non-zero, with one line naming the directory and the first one's pid,
// and leaves the first one running.
func TestDevRefusesADirectoryInUse(t *testing.T) {
	dir := t.TempDir()
	d := startDev(t, "--dir", dir, "--no-demo-workers")
	second := exec.Command(axBin, "dev", "--port", "0", "--dir", dir)
	second.Env = append(os.Environ(), "AX_LOG_FORMAT=text")
	dieWithTest(second, false)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = second.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = second.Process.Kill()
		<-done
		t.Fatalf("the second ax dev did not exit within 10 s:\n%s", out)
	}
	if err == nil {
		t.Fatalf("the second ax dev exited 0:\n%s", out)
	}
	msg := strings.TrimSpace(string(out))
	pid := strconv.Itoa(d.cmd.Process.Pid)
	if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, dir) || !strings.Contains(msg, "pid "+pid) {
		t.Fatalf("the second ax dev's output is not one line naming %s and pid %s:\n%s", dir, pid, msg)
	}
	resp, err := http.Get(d.api + "/readyz")
	if err != nil {
		t.Fatalf("the first ax dev after the second's refusal: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the first ax dev after the second's refusal: /readyz %d", resp.StatusCode)
	}
	d.interrupt()
}
