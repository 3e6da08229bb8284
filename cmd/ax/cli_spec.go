package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/groupflags"
	"github.com/ax-sched/ax/task"
)

// specFlags are the task spec flags of `ax submit` and `ax explain`.
type specFlags struct {
	typ            string
	payload        string
	payloadFile    string
	priority       int
	tags           map[string]string
	regions        []string
	delay          time.Duration
	runAt          string
	timeout        time.Duration
	maxRetries     int
	retryBase      time.Duration
	retryCap       time.Duration
	idempotencyKey string
	idempotencyTTL time.Duration
	preemptible    bool
	critical       bool
	tenant         string
	traceID        string
	limitKey       string
	maxPrice       float64
	maxWait        time.Duration
	maxPause       time.Duration
	resultTTL      time.Duration
	slots          float64
	group          groupflags.Flags
}

// specFlagNames are the flags above, to tell whether any was given.
var specFlagNames = append([]string{"type", "payload", "payload-file", "priority", "tag", "region", "delay", "run-at", "timeout",
	"max-retries", "retry-base", "retry-cap", "idempotency-key", "idempotency-ttl", "preemptible",
	"critical", "tenant", "trace-id", "limit-key", "max-price", "max-wait", "max-pause", "result-ttl", "slots"}, groupflags.Names...)

func (f *specFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.typ, "type", "", "task type (handler name), e.g. report.generate")
	fs.StringVar(&f.payload, "payload", "", "payload as a JSON value, e.g. '{\"n\":1}'")
	fs.StringVar(&f.payloadFile, "payload-file", "", "read the payload (JSON) from a file; - for stdin")
	fs.IntVar(&f.priority, "priority", task.DefaultPriority, fmt.Sprintf("priority, 0 (highest) to %d (lowest)", task.MaxPriority))
	fs.StringToStringVar(&f.tags, "tag", nil, "resource tag key=value a pool must carry (repeatable)")
	fs.StringSliceVar(&f.regions, "region", nil, "region the task may run in (repeatable; none: any)")
	fs.DurationVar(&f.delay, "delay", 0, "earliest start, from now (e.g. 10m)")
	fs.StringVar(&f.runAt, "run-at", "", "earliest start, RFC 3339 time (e.g. 2026-05-01T08:00:00Z)")
	fs.DurationVar(&f.timeout, "timeout", 0, "execution limit per attempt (default: the region's)")
	fs.IntVar(&f.maxRetries, "max-retries", 0, "retries after the first attempt (default: the region's)")
	fs.DurationVar(&f.retryBase, "retry-base", 0, "first retry backoff (default: the region's)")
	fs.DurationVar(&f.retryCap, "retry-cap", 0, "longest retry backoff (default: the region's)")
	fs.StringVar(&f.idempotencyKey, "idempotency-key", "", "the same key within its TTL returns the first task")
	fs.DurationVar(&f.idempotencyTTL, "idempotency-ttl", 0, "how long the idempotency key holds (default 24h)")
	fs.BoolVar(&f.preemptible, "preemptible", false, "may be stopped for a more urgent task")
	fs.BoolVar(&f.critical, "critical", false, "admitted even under backpressure")
	fs.StringVar(&f.tenant, "tenant", "", "owning tenant (default: the token's)")
	fs.StringVar(&f.traceID, "trace-id", "", "W3C trace id to propagate (32 hex digits; default: generated)")
	fs.Float64Var(&f.maxPrice, "max-price", 0, "max_price_per_slot_hour: never placed on a pool dearer than this (USD per slot-hour; 0: no cap)")
	fs.DurationVar(&f.maxWait, "max-wait", 0, "max_wait: the task's target for its wait before it starts; the cheapest pool expected to start it within that wins (0: the pools')")
	fs.DurationVar(&f.maxPause, "max-pause", 0, "max_pause: the most the handler's retry-after answers may make the task wait in all; past it an answer fails the attempt (0: the region's retry.max_pause)")
	fs.StringVar(&f.limitKey, "limit-key", "", "the shared resource whose limits apply (the region's limits: config, at most 64 bytes)")
	fs.DurationVar(&f.resultTTL, "result-ttl", 0, "result_ttl: how long the task and its result are kept after it succeeds (1s to 720h; default: the region's retention)")
	fs.Float64Var(&f.slots, "slots", 0, "the share of a worker slot the task holds while it runs, 0.001 to 1 (0.25: four such tasks share one slot; default: a whole slot)")
	f.group.Register(fs)
}

// typed names a spec flag given on the command line, to refuse it next to
// -f. Values from AX_* env or the settings file are ignored with -f.
func (f *specFlags) typed(explicit func(string) bool) (string, bool) {
	for _, n := range specFlagNames {
		if explicit(n) {
			return n, true
		}
	}
	return "", false
}

// spec builds the spec from the flags and checks it with the server's rules,
// so a bad value is a usage error before any request.
func (f *specFlags) spec(env *cli.Env) (*task.Spec, error) {
	fl := env.Cmd.Flags()
	s := &task.Spec{
		Type:                f.typ,
		Tags:                f.tags,
		Regions:             f.regions,
		Delay:               task.Duration(f.delay),
		Timeout:             task.Duration(f.timeout),
		RetryBase:           task.Duration(f.retryBase),
		RetryCap:            task.Duration(f.retryCap),
		IdempotencyKey:      f.idempotencyKey,
		IdempotencyTTL:      task.Duration(f.idempotencyTTL),
		Preemptible:         f.preemptible,
		Critical:            f.critical,
		Tenant:              f.tenant,
		TraceID:             f.traceID,
		LimitKey:            f.limitKey,
		MaxPricePerSlotHour: f.maxPrice,
		MaxWait:             task.Duration(f.maxWait),
		MaxPause:            task.Duration(f.maxPause),
		ResultTTL:           task.Duration(f.resultTTL),
	}
	if f.group.Apply(s); s.Type == "" {
		return nil, cli.Usage("--type is required (or -f FILE)")
	}
	if fl.Changed("priority") {
		if f.priority < 0 || f.priority > task.MaxPriority {
			return nil, cli.Usage("--priority %d: must be between 0 and %d", f.priority, task.MaxPriority)
		}
		s.Priority = &f.priority
	}
	if fl.Changed("slots") {
		if f.slots <= 0 {
			return nil, cli.Usage("--slots %g: must be from 0.001 to 1", f.slots)
		}
		s.Slots = task.Slots(f.slots)
	}
	if fl.Changed("max-retries") {
		s.MaxRetries = &f.maxRetries
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"delay", f.delay}, {"timeout", f.timeout}, {"retry-base", f.retryBase}, {"retry-cap", f.retryCap}, {"idempotency-ttl", f.idempotencyTTL}, {"max-pause", f.maxPause}, {"result-ttl", f.resultTTL}} {
		if d.v < 0 {
			return nil, cli.Usage("--%s %s: must not be negative", d.name, d.v)
		}
	}
	if f.runAt != "" {
		t, err := time.Parse(time.RFC3339, f.runAt)
		if err != nil {
			return nil, cli.Usage("--run-at %q: want an RFC 3339 time such as 2026-05-01T08:00:00Z", f.runAt)
		}
		if f.delay != 0 {
			return nil, cli.Usage("give --run-at or --delay, not both")
		}
		s.RunAt = &t
	}
	switch {
	case f.payload != "" && f.payloadFile != "":
		return nil, cli.Usage("give --payload or --payload-file, not both")
	case f.payload != "":
		if !json.Valid([]byte(f.payload)) {
			return nil, cli.Usage("--payload is not valid JSON (quote strings: '\"text\"')")
		}
		s.Payload = json.RawMessage(f.payload)
	case f.payloadFile != "":
		b, err := env.ReadInput(f.payloadFile)
		if err != nil {
			return nil, err
		}
		if !json.Valid(b) {
			return nil, cli.Usage("--payload-file %s: not valid JSON", cli.InputName(f.payloadFile))
		}
		s.Payload = json.RawMessage(strings.TrimSpace(string(b)))
	}
	if err := client.ValidateSpec(s); err != nil {
		return nil, cli.Usage("%s", cliFieldError(err))
	}
	return s, nil
}

// cliFieldError formats a spec validation error like the server's:
// "<message> (field <f>)".
func cliFieldError(err error) string {
	var fe *task.FieldError
	if errors.As(err, &fe) {
		if fe.Field == "" {
			return fe.Msg
		}
		return fmt.Sprintf("%s (field %s)", fe.Msg, fe.Field)
	}
	return err.Error()
}

// decodeSpecLine reads one spec of a file: lenient on unknown fields (the
// server names those), strict on the rules that hold everywhere.
func decodeSpecLine(b []byte) (*task.Spec, error) {
	var s task.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, &task.FieldError{Field: te.Field, Msg: "must be " + te.Type.String()}
		}
		return nil, &task.FieldError{Msg: "not a JSON object: " + strings.TrimPrefix(err.Error(), "json: ")}
	}
	if err := client.ValidateSpec(&s); err != nil {
		return nil, err
	}
	return &s, nil
}
