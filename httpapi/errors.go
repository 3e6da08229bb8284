package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation"
	"github.com/ax-sched/ax/queue"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// apiError is an error with its HTTP shape.
type apiError struct {
	status     int
	code, msg  string
	field      string
	retryAfter time.Duration
	expl       *apiv1.Explanation
	peer       *apiv1.Error
	// detail is what the caller is not told (a Redis error, a script
	// hash, a peer's URL): logged with ref, the correlation id the
	// answer's message names.
	detail, ref string
}

func (e *apiError) Error() string { return e.msg }

// toAPIError is the one mapping of errors to HTTP statuses: every
// handler's error goes through it (writeError), and so does every region's
// part of a fan-out (outcomes).
func toAPIError(err error) *apiError {
	var ae *apiError
	var fe *task.FieldError
	var te *task.TransitionError
	var pe *federation.PlacementError
	var peer *federation.PeerError
	var ns *federation.NotServedError
	var none *federation.NoRegionAnswered
	var tl *TooLargeError
	var rf *federation.Refusal
	var qe *federation.QuotaError
	var be *federation.BudgetError
	var we *apiv1.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &we):
		// The errors of packages served through interfaces (Schedules):
		// they name their code; the status is the code's.
		return &apiError{status: statusOf(we.Code), code: we.Code, msg: we.Message, field: we.Field,
			retryAfter: time.Duration(we.RetryAfterSeconds) * time.Second, expl: we.Explanation}
	case errors.As(err, &tl):
		return &apiError{status: 413, code: apiv1.CodeTooLarge, msg: tl.Error()}
	case errors.As(err, &fe) && fe.TooLarge:
		return &apiError{status: 413, code: apiv1.CodeTooLarge, msg: fe.Error(), field: fe.Field}
	case errors.As(err, &fe):
		return &apiError{status: 400, code: apiv1.CodeInvalid, msg: fe.Msg, field: fe.Field}
	case errors.Is(err, task.ErrBadID):
		return &apiError{status: 404, code: apiv1.CodeNotFound, msg: "no such task (malformed id)", field: "id"}
	case errors.Is(err, task.ErrNotFound):
		return &apiError{status: 404, code: apiv1.CodeNotFound, msg: "no such task"}
	case errors.Is(err, queue.ErrDAGNotFound):
		return &apiError{status: 404, code: apiv1.CodeNotFound, msg: "no such DAG run", field: "id"}
	case errors.Is(err, task.ErrIdempotencyConflict):
		return &apiError{status: 409, code: apiv1.CodeConflict, msg: "idempotency key already used with a different spec", field: "idempotency_key"}
	case errors.As(err, &te):
		// The task's state is what does not allow it.
		return &apiError{status: 409, code: apiv1.CodeFailedPrecond, msg: te.Error(), field: "state"}
	case errors.As(err, &pe):
		ex := toExplanation(pe.Explanation)
		if pe.Saturated {
			return &apiError{status: 429, code: apiv1.CodeSaturated, msg: pe.Error(), retryAfter: pe.RetryAfter, expl: &ex}
		}
		return &apiError{status: 422, code: apiv1.CodeUnplaceable, msg: pe.Error(), expl: &ex}
	case errors.As(err, &qe):
		// Tasks finish on their own time: a few seconds is a fair retry.
		return &apiError{status: 429, code: apiv1.CodeQuotaExceeded, msg: qe.Error(), field: qe.Field, retryAfter: 5 * time.Second}
	case errors.As(err, &be):
		// Spend does not fall before the month ends: no Retry-After.
		return &apiError{status: 429, code: apiv1.CodeBudgetExceeded, msg: be.Error(), field: "monthly_budget_usd"}
	case errors.As(err, &rf):
		return &apiError{status: 422, code: apiv1.CodeUnplaceable, msg: rf.Reason, field: rf.Field}
	case errors.As(err, &ns):
		return &apiError{status: 404, code: apiv1.CodeNotFound, msg: ns.Error()}
	case errors.As(err, &none):
		// Each region as its own error would be answered.
		why := make([]string, len(none.Parts))
		for i, p := range none.Parts {
			why[i] = p.Region + ": " + toAPIError(p.Err).body().Message
		}
		return &apiError{status: 503, code: apiv1.CodeUnavailable, retryAfter: 5 * time.Second,
			msg: federation.ErrRegionUnavailable.Error() + ": no region answered: " + strings.Join(why, "; ")}
	case errors.Is(err, federation.ErrRegionUnavailable):
		return &apiError{status: 503, code: apiv1.CodeUnavailable, msg: err.Error(), retryAfter: 5 * time.Second}
	case errors.As(err, &peer):
		if peer.Status >= 400 && peer.Status < 600 && peer.Body.Code != "" {
			// Its Retry-After too: the holder's 503 (its Redis out) is
			// the caller's, header included.
			b := peer.Body
			return &apiError{status: peer.Status, code: b.Code, msg: b.Message, field: b.Field, peer: &b,
				retryAfter: time.Duration(b.RetryAfterSeconds) * time.Second}
		}
		return hidden(502, apiv1.CodeUnavailable, "another region's server gave an unusable answer", 0, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &apiError{status: 503, code: apiv1.CodeUnavailable, msg: err.Error(), retryAfter: time.Second}
	case isStoreOutage(err):
		// Redis down, out of memory, its pool exhausted: retry later.
		return hidden(503, apiv1.CodeUnavailable, "the task store is unavailable, retry later", 5*time.Second, err)
	}
	return hidden(500, apiv1.CodeInternal, "internal error", 0, err)
}

// hidden is an answer whose cause stays in the server's log: the message
// names a correlation id, the log line has the same id and the error.
func hidden(status int, code, msg string, retryAfter time.Duration, err error) *apiError {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ref := hex.EncodeToString(b[:])
	return &apiError{status: status, code: code, msg: msg + " (ref " + ref + ")", retryAfter: retryAfter,
		detail: err.Error(), ref: ref}
}

// isStoreOutage reports a Redis failure: an error Redis answered (OOM,
// NOSCRIPT, READONLY, ...), a closed or exhausted client, a network error
// reaching it, or too few replicas acknowledging a write (queue.ErrUnavailable).
func isStoreOutage(err error) bool {
	var re redis.Error
	var ne net.Error
	return errors.As(err, &re) || errors.As(err, &ne) || errors.Is(err, queue.ErrUnavailable) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED)
}

// statusOf is the HTTP status of an API error code.
func statusOf(code string) int {
	switch code {
	case apiv1.CodeInvalid:
		return http.StatusBadRequest
	case apiv1.CodeUnauthorized:
		return http.StatusUnauthorized
	case apiv1.CodeForbidden:
		return http.StatusForbidden
	case apiv1.CodeNotFound:
		return http.StatusNotFound
	case apiv1.CodeConflict, apiv1.CodeFailedPrecond:
		return http.StatusConflict
	case apiv1.CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	case apiv1.CodeHeadersTooLarge:
		return http.StatusRequestHeaderFieldsTooLarge
	case apiv1.CodeUnplaceable:
		return http.StatusUnprocessableEntity
	case apiv1.CodeSaturated, apiv1.CodeQuotaExceeded, apiv1.CodeBudgetExceeded:
		return http.StatusTooManyRequests
	case apiv1.CodeUnavailable:
		return http.StatusServiceUnavailable
	case apiv1.CodeMethodNotAllowed:
		return http.StatusMethodNotAllowed
	}
	return http.StatusInternalServerError
}

func (e *apiError) body() apiv1.Error {
	if e.peer != nil {
		return *e.peer
	}
	b := apiv1.Error{Code: e.code, Message: e.msg, Field: e.field, Explanation: e.expl}
	if e.retryAfter > 0 {
		b.RetryAfterSeconds = int((e.retryAfter + time.Second - 1) / time.Second)
	}
	return b
}

func writeError(w http.ResponseWriter, err error) {
	e := toAPIError(err)
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, e.status, apiv1.ErrorBody{Error: e.body()})
}

// prefixField names a nested object's field error from the outer object:
// "tags.gpu" in "spec" becomes "spec.tags.gpu".
func prefixField(prefix string, err error) error {
	var fe *task.FieldError
	if errors.As(err, &fe) {
		return fe.Under(prefix)
	}
	return err
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}
