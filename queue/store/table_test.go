package store_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// snapshot is every key of the shard with its full content, to prove that
// an illegal transition changed nothing.
func (e *env) snapshot() string {
	e.t.Helper()
	keys := e.keys("*")
	sort.Strings(keys)
	out := ""
	for _, k := range keys {
		if k == queue.EventsKey(e.s.Prefix(0)) { // the event stream only grows
			continue
		}
		v, err := e.s.Client().Dump(e.ctx, k).Result()
		if err != nil {
			e.t.Fatal(err)
		}
		out += k + "=" + v + "\n"
	}
	return out
}

// into brings a new task into a state and returns its id and lease token.
func (e *env) into(st task.State) (string, string) {
	e.t.Helper()
	switch st {
	case task.Pending:
		return e.submit("", delay(time.Hour)), ""
	case task.Ready:
		return e.submit("cpu"), ""
	case task.Running, task.Success, task.Failed, task.Canceled:
		id := e.submit("cpu", retries(0))
		tk := e.claimOne("cpu")
		switch st {
		case task.Success:
			if errs, _ := e.s.Complete(e.ctx, queue.Completion{ID: id, Token: tk.LeaseToken}); errs[0] != nil {
				e.t.Fatal(errs[0])
			}
		case task.Failed:
			if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tk.LeaseToken, Error: "x", Retryable: true}); err != nil {
				e.t.Fatal(err)
			}
		case task.Canceled:
			if _, err := e.s.Cancel(e.ctx, id, "", "t"); err != nil {
				e.t.Fatal(err)
			}
			if _, _, err := e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tk.LeaseToken, Error: "ctx canceled"}); err != nil {
				e.t.Fatal(err)
			}
		}
		return id, tk.LeaseToken
	}
	e.t.Fatalf("into %s", st)
	return "", ""
}

type op struct {
	name string
	do   func(e *env, id, token string) (task.State, error)
}

var ops = []op{
	{"cancel", func(e *env, id, _ string) (task.State, error) { return e.s.Cancel(e.ctx, id, "", "t") }},
	{"replay", func(e *env, id, _ string) (task.State, error) {
		if err := e.s.Replay(e.ctx, id, "t"); err != nil {
			return "", err
		}
		return task.Pending, nil
	}},
	{"complete", func(e *env, id, tok string) (task.State, error) {
		errs, err := e.s.Complete(e.ctx, queue.Completion{ID: id, Token: tok})
		if err != nil {
			return "", err
		}
		if errs[0] != nil {
			return "", errs[0]
		}
		return task.Success, nil
	}},
	{"fail", func(e *env, id, tok string) (task.State, error) {
		st, _, err := e.s.Fail(e.ctx, queue.Failure{ID: id, Token: tok, Error: "e", Retryable: true})
		return st, err
	}},
	{"return", func(e *env, id, tok string) (task.State, error) {
		return e.s.Return(e.ctx, id, tok, task.ReasonWorkerShutdown, 0)
	}},
	{"priority", func(e *env, id, _ string) (task.State, error) {
		return "", e.s.SetPriority(e.ctx, id, 0, "t")
	}},
}

func TestTransitionTable(t *testing.T) {
	// want: the state after the op, or "illegal".
	const illegal = "illegal"
	table := map[task.State]map[string]task.State{
		task.Pending:  {"cancel": task.Canceled, "replay": illegal, "complete": illegal, "fail": illegal, "return": illegal, "priority": task.Pending},
		task.Ready:    {"cancel": task.Canceled, "replay": illegal, "complete": illegal, "fail": illegal, "return": illegal, "priority": task.Ready},
		task.Running:  {"cancel": task.Running, "replay": illegal, "complete": task.Success, "fail": task.Failed, "return": task.Ready, "priority": task.Running},
		task.Success:  {"cancel": illegal, "replay": illegal, "complete": illegal, "fail": illegal, "return": illegal, "priority": illegal},
		task.Failed:   {"cancel": illegal, "replay": task.Pending, "complete": illegal, "fail": illegal, "return": illegal, "priority": illegal},
		task.Canceled: {"cancel": illegal, "replay": illegal, "complete": illegal, "fail": illegal, "return": illegal, "priority": illegal},
	}
	e := newEnv(t, oneShard) // snapshot reads one shard's keys
	for from, row := range table {
		for _, o := range ops {
			want := row[o.name]
			t.Run(fmt.Sprintf("%s/%s", from, o.name), func(t *testing.T) {
				e.t = t
				if err := e.flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				id, tok := e.into(from)
				before := e.snapshot()
				_, err := o.do(e, id, tok)
				if want == illegal {
					var te *task.TransitionError
					if err == nil || !(errors.As(err, &te) || errors.Is(err, queue.ErrLeaseLost)) {
						t.Fatalf("want a typed error, got %v", err)
					}
					if after := e.snapshot(); after != before {
						t.Fatalf("an illegal %s changed state:\nbefore %s\nafter  %s", o.name, before, after)
					}
					return
				}
				if err != nil {
					t.Fatalf("legal %s: %v", o.name, err)
				}
				if got := e.state(id); got != want {
					t.Fatalf("%s from %s: state %s, want %s", o.name, from, got, want)
				}
			})
		}
	}
}
