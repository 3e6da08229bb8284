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
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// apiError is an error as the API answers it: its code (apiv1.Code*)
// decides the HTTP status (statusOf), the rest fills the body and the
// Retry-After header.
type apiError struct {
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

// status is the HTTP status the error is answered with: its code's.
func (e *apiError) status() int { return statusOf(e.code) }

// toAPIError is the one mapping of errors to API errors (their codes, so
// their statuses): every handler's error goes through it (writeError), and
// so does every region's part of a fan-out (outcomes).
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
		// they name their code.
		return &apiError{code: we.Code, msg: we.Message, field: we.Field,
			retryAfter: time.Duration(we.RetryAfterSeconds) * time.Second, expl: we.Explanation}
	case errors.As(err, &tl):
		return &apiError{code: apiv1.CodeTooLarge, msg: tl.Error()}
	case errors.As(err, &fe) && fe.TooLarge:
		return &apiError{code: apiv1.CodeTooLarge, msg: fe.Error(), field: fe.Field}
	case errors.As(err, &fe):
		return &apiError{code: apiv1.CodeInvalid, msg: fe.Msg, field: fe.Field}
	case errors.Is(err, task.ErrBadID):
		return &apiError{code: apiv1.CodeNotFound, msg: "no such task (malformed id)", field: "id"}
	case errors.Is(err, task.ErrNotFound):
		return &apiError{code: apiv1.CodeNotFound, msg: "no such task"}
	case errors.Is(err, federation.ErrDAGNotFound):
		return &apiError{code: apiv1.CodeNotFound, msg: "no such DAG run", field: "id"}
	case errors.Is(err, task.ErrIdempotencyConflict):
		return &apiError{code: apiv1.CodeConflict, msg: "idempotency key already used with a different spec", field: "idempotency_key"}
	case errors.As(err, &te):
		// The task's state is what does not allow it.
		return &apiError{code: apiv1.CodeFailedPrecond, msg: te.Error(), field: "state"}
	case errors.As(err, &pe):
		ex := toExplanation(pe.Explanation)
		if pe.Saturated {
			return &apiError{code: apiv1.CodeSaturated, msg: pe.Error(), retryAfter: pe.RetryAfter, expl: &ex}
		}
		return &apiError{code: apiv1.CodeUnplaceable, msg: pe.Error(), expl: &ex}
	case errors.As(err, &qe):
		// Tasks finish on their own time: a few seconds is a fair retry.
		return &apiError{code: apiv1.CodeQuotaExceeded, msg: qe.Error(), field: qe.Field, retryAfter: 5 * time.Second}
	case errors.As(err, &be):
		// Spend does not fall before the month ends: no Retry-After.
		return &apiError{code: apiv1.CodeBudgetExceeded, msg: be.Error(), field: "monthly_budget_usd"}
	case errors.As(err, &rf):
		return &apiError{code: apiv1.CodeUnplaceable, msg: rf.Reason, field: rf.Field}
	case errors.As(err, &ns):
		return &apiError{code: apiv1.CodeNotFound, msg: ns.Error()}
	case errors.As(err, &none):
		// Each region as its own error would be answered.
		why := make([]string, len(none.Parts))
		for i, p := range none.Parts {
			why[i] = p.Region + ": " + toAPIError(p.Err).body().Message
		}
		return &apiError{code: apiv1.CodeUnavailable, retryAfter: 5 * time.Second,
			msg: federation.ErrRegionUnavailable.Error() + ": no region answered: " + strings.Join(why, "; ")}
	case errors.Is(err, federation.ErrRegionUnavailable):
		return &apiError{code: apiv1.CodeUnavailable, msg: err.Error(), retryAfter: 5 * time.Second}
	case errors.As(err, &peer):
		if peer.Status >= 400 && peer.Status < 600 && peer.Body.Code != "" {
			// Its Retry-After too: the holder's 503 (its Redis out) is
			// the caller's, header included. The peer is an ax server: its
			// status is its code's.
			b := peer.Body
			return &apiError{code: b.Code, msg: b.Message, field: b.Field, peer: &b,
				retryAfter: time.Duration(b.RetryAfterSeconds) * time.Second}
		}
		return hidden(apiv1.CodeBadGateway, "another region's server gave an unusable answer", 0, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &apiError{code: apiv1.CodeUnavailable, msg: err.Error(), retryAfter: time.Second}
	case isStoreOutage(err):
		// Redis down, out of memory, its pool exhausted: retry later.
		return hidden(apiv1.CodeUnavailable, "the task store is unavailable, retry later", 5*time.Second, err)
	}
	return hidden(apiv1.CodeInternal, "internal error", 0, err)
}

// hidden is an answer whose cause stays in the server's log: the message
// names a correlation id, the log line has the same id and the error.
func hidden(code, msg string, retryAfter time.Duration, err error) *apiError {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ref := hex.EncodeToString(b[:])
	return &apiError{code: code, msg: msg + " (ref " + ref + ")", retryAfter: retryAfter,
		detail: err.Error(), ref: ref}
}

// isStoreOutage reports a Redis failure: an error Redis answered (OOM,
// NOSCRIPT, READONLY, ...), a closed or exhausted client, a network error
// reaching it, or too few replicas acknowledging a write (federation.ErrStoreUnavailable).
func isStoreOutage(err error) bool {
	var re redis.Error
	var ne net.Error
	return errors.As(err, &re) || errors.As(err, &ne) || errors.Is(err, federation.ErrStoreUnavailable) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED)
}

// statuses is the one table of the HTTP status of each API error code
// (apiv1.Code*): every answer of an error takes its status from it.
var statuses = map[string]int{
	apiv1.CodeInvalid:          http.StatusBadRequest,
	apiv1.CodeUnauthorized:     http.StatusUnauthorized,
	apiv1.CodeTokenExpired:     http.StatusUnauthorized,
	apiv1.CodeForbidden:        http.StatusForbidden,
	apiv1.CodeNotFound:         http.StatusNotFound,
	apiv1.CodeMethodNotAllowed: http.StatusMethodNotAllowed,
	apiv1.CodeConflict:         http.StatusConflict,
	apiv1.CodeFailedPrecond:    http.StatusConflict,
	apiv1.CodeTooLarge:         http.StatusRequestEntityTooLarge,
	apiv1.CodeUnplaceable:      http.StatusUnprocessableEntity,
	apiv1.CodeSaturated:        http.StatusTooManyRequests,
	apiv1.CodeQuotaExceeded:    http.StatusTooManyRequests,
	apiv1.CodeBudgetExceeded:   http.StatusTooManyRequests,
	apiv1.CodeHeadersTooLarge:  http.StatusRequestHeaderFieldsTooLarge,
	apiv1.CodeInternal:         http.StatusInternalServerError,
	apiv1.CodeBadGateway:       http.StatusBadGateway,
	apiv1.CodeUnavailable:      http.StatusServiceUnavailable,
}

// statusOf is the HTTP status of an API error code; one the table does not
// name is a 500.
func statusOf(code string) int {
	if s, ok := statuses[code]; ok {
		return s
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
	writeJSON(w, e.status(), apiv1.ErrorBody{Error: e.body()})
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
