package fanout

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
)

// Deadline bounds each peer's part of a fan-out. It is below the peer
// client's own 10 s timeout, so a slow region is reported by this deadline.
const Deadline = 8 * time.Second

// MaxDLQLimit is the largest page of GET /v1/dlq.
const MaxDLQLimit = 1000

// regionPart is one region's answer to a fan-out.
type regionPart[T any] struct {
	region string
	val    T
	err    error
}

// fanOut runs one operation in each region — this one locally, the others
// through their API — in parallel, and returns the parts in the order of
// regions once every part has answered or given up. A remote part that
// got no answer at all is an peer.ErrRegionUnavailable; a peer's error answer
// is a *peer.Error.
func fanOut[T any](ctx context.Context, rd *Reader, regions []string,
	local func(ctx context.Context) (T, error),
	remote func(ctx context.Context, api string) (T, error)) []regionPart[T] {
	parts := make([]regionPart[T], len(regions))
	var wg sync.WaitGroup
	for i, name := range regions {
		parts[i].region = name
		wg.Add(1)
		go func() {
			defer wg.Done()
			if name == rd.cfg.Region {
				parts[i].val, parts[i].err = local(ctx)
				return
			}
			api, err := rd.cfg.Peer.API(name)
			if err != nil {
				parts[i].err = err
				return
			}
			rd.cfg.Peer.Forwarded(name)
			cctx, cancel := context.WithTimeout(ctx, Deadline)
			defer cancel()
			parts[i].val, err = remote(cctx, api)
			var pe *peer.Error
			if err != nil && !errors.As(err, &pe) {
				err = fmt.Errorf("%w: %s: %v", peer.ErrRegionUnavailable, name, err)
			}
			parts[i].err = err
		}()
	}
	wg.Wait()
	return parts
}

// NotServedError is a forwarded request about another region than this
// server's: a request is forwarded once, to the region it names.
type NotServedError struct{ Region string }

func (e *NotServedError) Error() string { return "region " + e.Region + " is not served here" }

// fanOutRegions are the regions a request asks: this one alone when it was
// forwarded; only when given (a region of the federation); else every
// region configured or in the view, sorted by name.
// FanOutRegions are the regions a listing of every region asks (only's
// alone when given; this one alone on a forwarded request): the API's DAG
// listing fans out with it.
func (rd *Reader) FanOutRegions(only string, hops int) ([]string, error) {
	return rd.fanOutRegions(only, hops)
}

func (rd *Reader) fanOutRegions(only string, hops int) ([]string, error) {
	if hops > 0 {
		if only != "" && only != rd.cfg.Region {
			return nil, &NotServedError{Region: only}
		}
		return []string{rd.cfg.Region}, nil
	}
	// Only the configured regions: a registration in the global etcd is no
	// reason to send a request (with the cluster token) anywhere.
	if only != "" {
		if !rd.cfg.Peer.KnownRegion(only) {
			return nil, peer.UnknownRegion(only)
		}
		return []string{only}, nil
	}
	out := append([]string{rd.cfg.Region}, rd.cfg.Regions...)
	sort.Strings(out)
	return slices.Compact(out), nil
}

// RegionPart is one region's part of an answer gathered from every region:
// what it contributed (Count: the dead letters of a page it holds, or the
// tasks it cancelled), or why it did not answer (Err).
type RegionPart struct {
	Region string
	Count  int
	Err    error
}

// NoRegionAnswered is a fan-out that no region of several answered: each
// part says why. It is an peer.ErrRegionUnavailable.
type NoRegionAnswered struct{ Parts []RegionPart }

func (e *NoRegionAnswered) Error() string {
	why := make([]string, len(e.Parts))
	for i, p := range e.Parts {
		why[i] = p.Region + ": " + p.Err.Error()
	}
	return peer.ErrRegionUnavailable.Error() + ": no region answered: " + strings.Join(why, "; ")
}

func (e *NoRegionAnswered) Unwrap() error { return peer.ErrRegionUnavailable }

// gather turns a fan-out's parts into per-region parts and the regions that
// did not answer. When no part answered it returns an error instead: the
// part's own when one region was asked, else a *NoRegionAnswered.
func gather[T any](rd *Reader, op string, parts []regionPart[T], count func(T) int) ([]RegionPart, []string, error) {
	outs := make([]RegionPart, 0, len(parts))
	unavailable := []string{}
	for _, p := range parts {
		o := RegionPart{Region: p.region, Count: count(p.val), Err: p.err}
		if p.err != nil {
			unavailable = append(unavailable, p.region)
			rd.cfg.Logger.Warn("fan-out: a region did not answer", "op", op, "target", p.region, "err", p.err)
		}
		outs = append(outs, o)
	}
	switch {
	case len(unavailable) < len(parts):
		return outs, unavailable, nil
	case len(parts) == 1:
		return nil, nil, parts[0].err
	}
	return nil, nil, &NoRegionAnswered{Parts: outs}
}

// ---------------------------------------------------------------------------
// Bulk cancel
// ---------------------------------------------------------------------------

// BulkCanceled is what a bulk cancel did: the sum, and each region's part.
type BulkCanceled struct {
	Canceled    int
	Regions     []RegionPart
	Unavailable []string // the regions that did not answer (they are in Regions too, with their error)
}

// BulkCancel cancels the PENDING and READY tasks matching f in every region
// (or only), each region counting its own; by is recorded in the trails.
// hops is how many servers the request being served has passed.
func (rd *Reader) BulkCancel(ctx context.Context, f queue.Filter, only, by string, hops int) (*BulkCanceled, error) {
	regions, err := rd.fanOutRegions(only, hops)
	if err != nil {
		return nil, err
	}
	path := "/v1/tasks/cancel?" + url.Values{apiv1.ParamOnBehalfOf: {by}}.Encode()
	body := apiv1.BulkCancelRequest{Type: f.Type, State: f.State, Tenant: f.Tenant}
	parts := fanOut(ctx, rd, regions,
		func(ctx context.Context) (int, error) {
			// A partial count is kept with the error: those tasks are cancelled.
			return rd.cfg.Store.CancelWhere(ctx, f, by)
		},
		func(ctx context.Context, api string) (int, error) {
			var out apiv1.BulkCancelResponse
			_, err := rd.cfg.Peer.Call(ctx, api, http.MethodPost, path, body, &out)
			return out.Canceled, err
		})
	outs, unavailable, err := gather(rd, "bulk cancel", parts, func(k int) int { return k })
	if err != nil {
		return nil, err
	}
	resp := &BulkCanceled{Regions: outs, Unavailable: unavailable}
	for _, o := range outs {
		resp.Canceled += o.Count
	}
	return resp, nil
}

// ---------------------------------------------------------------------------
// Dead letters
// ---------------------------------------------------------------------------

// DLQQuery is a listing of dead letters (GET /v1/dlq), its values checked
// by the API.
type DLQQuery struct {
	Type, Tenant string
	Region       string // only this region; "" every region
	Limit        int    // 1..MaxDLQLimit
	Offset       int    // skip this many after the cursor
	Cursor       string // "" from the newest; else a page's NextCursor
}

// dlqQuery is a DLQQuery with its cursor read.
type dlqQuery struct {
	DLQQuery
	after *dlqMark
}

func (q dlqQuery) matches(t *task.Task) bool {
	return (q.Type == "" || t.Type == q.Type) && (q.Tenant == "" || t.Tenant == q.Tenant)
}

// dlqMark is a place in the listing of dead letters, which runs newest
// first: by failure time (ms, the dead set's score), then by id, both
// descending. Ids are unique across regions, so the order is total and the
// same in every region: a mark is a cursor that every region understands.
type dlqMark struct {
	ms int64
	id string
}

func markOf(t *task.Task) dlqMark {
	m := dlqMark{id: t.ID}
	if t.FinishedAt != nil {
		m.ms = t.FinishedAt.UnixMilli()
	}
	return m
}

// newer reports whether a comes before b in the listing.
func (a dlqMark) newer(b dlqMark) bool { return a.ms > b.ms || a.ms == b.ms && a.id > b.id }

// Cursors are opaque to clients: base64url of "1:<ms>:<id>" (1 is the
// format's version).
func (a dlqMark) cursor() string {
	return base64.RawURLEncoding.EncodeToString([]byte("1:" + strconv.FormatInt(a.ms, 10) + ":" + a.id))
}

func parseCursor(s string) (dlqMark, error) {
	bad := &task.FieldError{Field: "cursor", Msg: "not a cursor of this listing (pass next_cursor back as it was given)"}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return dlqMark{}, bad
	}
	parts := strings.SplitN(string(b), ":", 3)
	if len(parts) != 3 || parts[0] != "1" {
		return dlqMark{}, bad
	}
	ms, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || ms < 0 {
		return dlqMark{}, bad
	}
	if _, err := task.ParseID(parts[2]); err != nil {
		return dlqMark{}, bad
	}
	return dlqMark{ms: ms, id: parts[2]}, nil
}

func sortNewestFirst(ts []*task.Task) {
	sort.Slice(ts, func(i, j int) bool { return markOf(ts[i]).newer(markOf(ts[j])) })
}

// DeadLetterPage is a page of the merged listing of dead letters.
type DeadLetterPage struct {
	Tasks      []*task.Task // newest first; HeldBy names the region holding each
	NextCursor string       // continues the listing; "" when nothing follows
	// Regions count each region's tasks of the page, or say why it did not
	// answer; those are in Unavailable too.
	Regions     []RegionPart
	Unavailable []string
}

// DeadLetters lists the dead letters of every region (or q.Region) that
// match q, newest first, merged: a page of q.Limit after q.Cursor, skipping
// q.Offset first. A cursor that is not one of this listing's is a
// *task.FieldError (cursor).
func (rd *Reader) DeadLetters(ctx context.Context, query DLQQuery, hops int) (*DeadLetterPage, error) {
	q := dlqQuery{DLQQuery: query}
	if query.Cursor != "" {
		m, err := parseCursor(query.Cursor)
		if err != nil {
			return nil, err
		}
		q.after = &m
	}
	regions, err := rd.fanOutRegions(q.Region, hops)
	if err != nil {
		return nil, err
	}
	after := q.after
	gone := map[string]bool{}
	// offset= (kept from the single-region API) skips whole pages by
	// cursor, so it means the same as paging there would.
	for skip := q.Offset; skip > 0; {
		pg, err := rd.dlqPage(ctx, regions, q, after, min(skip, MaxDLQLimit))
		if err != nil {
			return nil, err
		}
		for _, r := range pg.Unavailable {
			gone[r] = true
		}
		if pg.NextCursor == "" || len(pg.Tasks) == 0 {
			// Nothing left past the offset.
			pg.Tasks, pg.NextCursor = []*task.Task{}, ""
			for i := range pg.Regions {
				pg.Regions[i].Count = 0
			}
			return withGone(pg, gone), nil
		}
		m := markOf(pg.Tasks[len(pg.Tasks)-1])
		after = &m
		skip -= len(pg.Tasks)
	}
	pg, err := rd.dlqPage(ctx, regions, q, after, q.Limit)
	if err != nil {
		return nil, err
	}
	return withGone(pg, gone), nil
}

// withGone adds to a page the regions that did not answer while its offset
// was skipped.
func withGone(pg *DeadLetterPage, gone map[string]bool) *DeadLetterPage {
	for _, r := range pg.Unavailable {
		delete(gone, r)
	}
	for r := range gone {
		pg.Unavailable = append(pg.Unavailable, r)
	}
	sort.Strings(pg.Unavailable)
	return pg
}

// dlqPage asks each region for its first limit dead letters after `after`
// and keeps the first limit of all of them.
func (rd *Reader) dlqPage(ctx context.Context, regions []string, q dlqQuery, after *dlqMark, limit int) (*DeadLetterPage, error) {
	path := url.Values{}
	if q.Type != "" {
		path.Set("type", q.Type)
	}
	if q.Tenant != "" {
		path.Set("tenant", q.Tenant)
	}
	if after != nil {
		path.Set("cursor", after.cursor())
	}
	return rd.mergedPage(ctx, regions, listing{
		op: "dead letters", path: "/v1/dlq", query: path,
		local: func(ctx context.Context, limit int) ([]*task.Task, bool, error) {
			return rd.localDeadLetters(ctx, q, after, limit)
		},
		keep:   func(t *task.Task) bool { return q.matches(t) && (after == nil || after.newer(markOf(t))) },
		first:  func(a, b *task.Task) bool { return markOf(a).newer(markOf(b)) },
		cursor: func(t *task.Task) string { return markOf(t).cursor() },
	}, limit)
}

// listing is one listing of tasks merged from every region (dead letters,
// tasks): how a peer is asked, how this region answers, and the order.
type listing struct {
	op    string
	path  string     // the peers' endpoint
	query url.Values // its query but for limit: the filters, the cursor
	// local is this region's first limit entries of the listing and
	// whether more follow.
	local func(ctx context.Context, limit int) ([]*task.Task, bool, error)
	// keep checks an entry against the query and the cursor: a peer's
	// answer is checked too, so a server that ignored the cursor or a
	// filter can neither repeat nor leak entries.
	keep   func(t *task.Task) bool
	first  func(a, b *task.Task) bool // a comes before b
	cursor func(t *task.Task) string  // the cursor that continues after t
}

// mergedPage asks each region for its first limit entries of l and keeps
// the first limit of all of them, each naming the region that holds it.
// One id held in two regions (the home region's forwarding record and the
// task where it went) is listed once, as the region holding the task has
// it.
func (rd *Reader) mergedPage(ctx context.Context, regions []string, l listing, limit int) (*DeadLetterPage, error) {
	q := url.Values{}
	for k, v := range l.query {
		q[k] = v
	}
	q.Set("limit", strconv.Itoa(limit))
	parts := fanOut(ctx, rd, regions,
		func(ctx context.Context) (*apiv1.TaskList, error) {
			ts, more, err := l.local(ctx, limit)
			out := &apiv1.TaskList{Tasks: ts}
			if more && len(ts) > 0 {
				out.NextCursor = l.cursor(ts[len(ts)-1])
			}
			return out, err
		},
		func(ctx context.Context, api string) (*apiv1.TaskList, error) {
			var out apiv1.TaskList
			_, err := rd.cfg.Peer.Call(ctx, api, http.MethodGet, l.path+"?"+q.Encode(), nil, &out)
			return &out, err
		})
	all := []*task.Task{}
	more := false
	for _, p := range parts {
		if p.err != nil || p.val == nil {
			continue
		}
		for _, t := range p.val.Tasks {
			if t == nil || !l.keep(t) {
				continue
			}
			t.HeldBy = p.region
			all = append(all, t)
		}
		more = more || p.val.NextCursor != ""
	}
	sort.SliceStable(all, func(i, j int) bool { return l.first(all[i], all[j]) })
	all = holders(all)
	if len(all) > limit {
		all, more = all[:limit], true
	}
	outs, unavailable, err := gather(rd, l.op, parts, func(*apiv1.TaskList) int { return 0 })
	if err != nil {
		return nil, err
	}
	held := map[string]int{}
	for _, t := range all {
		held[t.HeldBy]++
	}
	for i := range outs {
		outs[i].Count = held[outs[i].Region]
	}
	pg := &DeadLetterPage{Tasks: all, Regions: outs, Unavailable: unavailable}
	if more && len(all) > 0 {
		pg.NextCursor = l.cursor(all[len(all)-1])
	}
	return pg, nil
}

// holders lists each id of a sorted listing once: where one id is held in
// two regions (the home region's forwarding record, and the task where it
// went), the holder's record.
func holders(ts []*task.Task) []*task.Task {
	out := ts[:0]
	for _, t := range ts {
		if k := len(out) - 1; k >= 0 && out[k].ID == t.ID {
			if out[k].State == task.HandedOff && t.State != task.HandedOff {
				out[k] = t
			}
			continue
		}
		out = append(out, t)
	}
	return out
}

// Reads of this region's dead set: deadLetterChunk entries per shard, each
// read overlapping the previous by deadLetterOverlap, so that entries
// leaving the set between two reads (replayed, swept) make the scan skip
// none.
const (
	deadLetterChunk   = 500
	deadLetterOverlap = 50
)

// localDeadLetters lists this region's dead letters that match q and come
// after `after`, newest first: at most limit, and whether more follow.
//
// The store pages its shards merged newest first, in the listing's order
// (failure time, then id, both descending). Reads overlap by
// deadLetterOverlap, so entries leaving the set between two reads
// (replayed, swept) make the scan skip none. The scan starts at the newest
// entry each time, so a page deep in the set costs reads in proportion to
// its depth: an operator path, bounded by the dead-letter retention.
func (rd *Reader) localDeadLetters(ctx context.Context, q dlqQuery, after *dlqMark, limit int) ([]*task.Task, bool, error) {
	seen := map[string]bool{}
	found := []*task.Task{}
	for off := 0; ; off += deadLetterChunk - deadLetterOverlap {
		ts, err := rd.cfg.Store.DeadLetters(ctx, off, deadLetterChunk)
		if err != nil {
			return nil, false, err
		}
		for _, t := range ts {
			if seen[t.ID] {
				continue
			}
			seen[t.ID] = true
			if q.matches(t) && (after == nil || after.newer(markOf(t))) {
				found = append(found, t)
			}
		}
		sortNewestFirst(found)
		if len(found) > limit {
			return found[:limit], true, nil
		}
		if len(ts) < deadLetterChunk {
			return found, false, nil
		}
	}
}
