package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ax-sched/ax/internal/testenv"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/queue/store"
	"github.com/ax-sched/ax/task"
	"github.com/ax-sched/ax/worker"
)

// workerACL reads the rules of deploy/redis/ax-worker.acl (its one line
// that is not a comment).
func workerACL(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "deploy", "redis", "ax-worker.acl"))
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			if rules != nil {
				t.Fatalf("ax-worker.acl: more than one line of rules")
			}
			rules = strings.Fields(l)
		}
	}
	if len(rules) == 0 {
		t.Fatal("ax-worker.acl: no rules")
	}
	return rules
}

// A worker that reaches Redis as the ax-worker ACL user of
// deploy/redis/ax-worker.acl claims and completes tasks (one succeeds, one
// fails for good, one is retried) with no command refused, while that user
// cannot run FLUSHALL, CONFIG, KEYS, FUNCTION LOAD/DELETE or ACL, nor touch
// a key outside ax:.
func TestWorkerRedisACL(t *testing.T) {
	r := testenv.StartRedis(t, testenv.RedisOptions{Password: "admin-password-0123456789"})
	admin := r.Client()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args := []any{"ACL", "SETUSER", "ax-worker", "on", ">worker-password-0123456789"}
	for _, rule := range workerACL(t) {
		args = append(args, rule)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER with deploy/redis/ax-worker.acl: %v", err)
	}
	o := queue.Options{Region: "eu-west", Lease: 3 * time.Second}
	servers, err := store.New(admin, o)
	if err != nil {
		t.Fatal(err)
	}
	// The servers load the script library (a worker may not).
	if err := servers.LoadFunctions(ctx); err != nil {
		t.Fatal(err)
	}
	wc := redis.NewClient(&redis.Options{Addr: r.Addr(), Username: "ax-worker", Password: "worker-password-0123456789"})
	t.Cleanup(func() { wc.Close() })
	ws, err := store.New(wc, o)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, typ := range []string{"ok", "bad", "flaky"} {
		sp := &task.Spec{Type: typ, Tags: map[string]string{"class": "cpu"}, MaxRetries: ptr(1), RetryBase: task.Duration(10 * time.Millisecond)}
		if err := sp.Normalize(task.DefaultDefaults(), time.Now()); err != nil {
			t.Fatal(err)
		}
		res, err := servers.Submitter().Submit(ctx, queue.NewTask{Spec: sp, Pool: "cpu", Pinned: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res[0].ID)
	}
	w, err := worker.New(ws.Claimer(), worker.Options{Pool: "cpu", ID: "acl-w1", Concurrency: 2, Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	flaky := 0
	w.Handle("ok", func(ctx context.Context, t *worker.Task) error { time.Sleep(300 * time.Millisecond); return nil })
	w.Handle("bad", func(ctx context.Context, t *worker.Task) error { return worker.NonRetryable(errors.New("no")) })
	w.Handle("flaky", func(ctx context.Context, t *worker.Task) error {
		if flaky++; flaky == 1 {
			return errors.New("once")
		}
		return nil
	})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	// Stands in for the region leader: promotes the retry when due.
	want := map[string]task.State{ids[0]: task.Success, ids[1]: task.Failed, ids[2]: task.Success}
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, _ = servers.Maintainer().Promote(ctx, queue.Fence{Name: "t", Token: 1}, 100)
		finished := 0
		for id, st := range want {
			if tk, err := servers.Get(ctx, id); err == nil && tk.State == st {
				finished++
			}
		}
		if finished == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tasks not settled by the worker within 20s (want %v)", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatalf("worker: %v", err)
	}
	// Nothing the worker did was refused but its first attempts to load
	// the script library (the servers' job).
	log, err := admin.Do(ctx, "ACL", "LOG").Slice()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range log {
		m, _ := e.(map[any]any)
		if n, _ := m["count"].(int64); m["object"] != "function|load" || n > 4 {
			t.Errorf("ACL LOG after the worker's run: %v", e)
		}
	}
	for _, c := range [][]any{
		{"FLUSHALL"}, {"FLUSHDB"}, {"CONFIG", "GET", "requirepass"}, {"CONFIG", "SET", "maxmemory", "1"}, {"KEYS", "*"},
		{"SCAN", "0"}, {"FUNCTION", "LOAD", "REPLACE", "#!lua name=ax_x\nredis.register_function('f', function() return 1 end)"},
		{"FUNCTION", "DELETE", "ax_x"}, {"FUNCTION", "FLUSH"}, {"ACL", "LIST"}, {"MONITOR"},
		{"SHUTDOWN"}, {"CLIENT", "LIST"}, {"GET", "other:key"}, {"SET", "other:key", "x"},
	} {
		err := wc.Do(ctx, c...).Err()
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("the worker's user ran %v: %v, want NOPERM", fmt.Sprint(c...), err)
		}
	}
	if n, err := admin.DBSize(ctx).Result(); err != nil || n == 0 {
		t.Fatalf("the data is gone (dbsize %d, %v)", n, err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestWorkerACLAllowsEveryScriptCommand: the library's scripts run with
// the worker's rights when a worker calls them, so every command a script
// names must be one ax-worker.acl allows (a missing one fails only on the
// script path that reaches it).
func TestWorkerACLAllowsEveryScriptCommand(t *testing.T) {
	allowed := map[string]bool{}
	for _, r := range workerACL(t) {
		if strings.HasPrefix(r, "+") {
			allowed[strings.ToLower(r[1:])] = true
		}
	}
	call := regexp.MustCompile(`redis\.p?call\('([A-Za-z]+)'`)
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "queue", "scripts", "*.lua"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in queue/scripts: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(b), -1) {
			if c := strings.ToLower(m[1]); !allowed[c] {
				t.Errorf("%s calls %s, which deploy/redis/ax-worker.acl does not allow", filepath.Base(f), strings.ToUpper(c))
			}
		}
	}
}
