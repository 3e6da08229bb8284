package endpoint

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
	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/federation/handoff"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/federation/submit"
	"github.com/ax-sched/ax/task"
	"github.com/redis/go-redis/v9"
)

// Error is an error as the API answers it: its Code (apiv1.Code*) decides
// the HTTP status (Status, from the one table), the rest fills the body
// and the Retry-After header.
type Error struct {
	Code, Msg  string
	Field      string
	RetryAfter time.Duration
	Expl       *apiv1.Explanation
	peer       *apiv1.Error
	// Detail is what the caller is not told (a Redis error, a script
	// hash, a peer's URL): logged with Ref, the correlation id the
	// answer's message names.
	Detail, Ref string
}

func (e *Error) Error() string { return e.Msg }

// Status is the HTTP status the error is answered with: its code's.
func (e *Error) Status() int { return statusOf(e.Code) }

// ErrorOf is the one mapping of errors to API errors (their codes, so
// their statuses): every handler's error goes through it (WriteError), and
// so does every region's part of a fan-out (Outcomes).
func ErrorOf(err error) *Error {
	var ae *Error
	var fe *task.FieldError
	var te *task.TransitionError
	var uc *task.UniqueConflictError
	var pe *submit.PlacementError
	var perr *peer.Error
	var ns *fanout.NotServedError
	var none *fanout.NoRegionAnswered
	var tl *TooLargeError
	var rf *handoff.Refusal
	var qe *submit.QuotaError
	var re *submit.RateError
	var be *budget.BudgetError
	var we *apiv1.Error
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &we):
		// The errors of packages served through interfaces (Schedules):
		// they name their code.
		return &Error{Code: we.Code, Msg: we.Message, Field: we.Field,
			RetryAfter: time.Duration(we.RetryAfterSeconds) * time.Second, Expl: we.Explanation}
	case errors.As(err, &tl):
		return &Error{Code: apiv1.CodeTooLarge, Msg: tl.Error()}
	case errors.As(err, &fe) && fe.TooLarge:
		return &Error{Code: apiv1.CodeTooLarge, Msg: fe.Error(), Field: fe.Field}
	case errors.As(err, &fe):
		return &Error{Code: apiv1.CodeInvalid, Msg: fe.Msg, Field: fe.Field}
	case errors.Is(err, task.ErrBadID):
		return &Error{Code: apiv1.CodeNotFound, Msg: "no such task (malformed id)", Field: "id"}
	case errors.Is(err, task.ErrNotFound):
		return &Error{Code: apiv1.CodeNotFound, Msg: "no such task"}
	case errors.Is(err, federation.ErrDAGNotFound):
		return &Error{Code: apiv1.CodeNotFound, Msg: "no such DAG run", Field: "id"}
	case errors.Is(err, task.ErrIdempotencyConflict):
		return &Error{Code: apiv1.CodeConflict, Msg: "idempotency key already used with a different spec", Field: "idempotency_key"}
	case errors.As(err, &uc):
		return &Error{Code: apiv1.CodeConflict, Msg: uc.Error() + " (unique_conflict is reject)", Field: "unique_key"}
	case errors.As(err, &te):
		// The task's state is what does not allow it.
		return &Error{Code: apiv1.CodeFailedPrecond, Msg: te.Error(), Field: "state"}
	case errors.As(err, &pe):
		ex := ExplanationOf(pe.Explanation)
		if pe.Saturated {
			return &Error{Code: apiv1.CodeSaturated, Msg: pe.Error(), RetryAfter: pe.RetryAfter, Expl: &ex}
		}
		return &Error{Code: apiv1.CodeUnplaceable, Msg: pe.Error(), Expl: &ex}
	case errors.As(err, &qe):
		// Tasks finish on their own time: a few seconds is a fair retry.
		return &Error{Code: apiv1.CodeQuotaExceeded, Msg: qe.Error(), Field: qe.Field, RetryAfter: 5 * time.Second}
	case errors.As(err, &re):
		return &Error{Code: apiv1.CodeQuotaExceeded, Msg: re.Error(), RetryAfter: re.Wait}
	case errors.As(err, &be):
		// Spend does not fall before the month ends, but a raised budget
		// or a released reservation counts from the next spend read.
		return &Error{Code: apiv1.CodeBudgetExceeded, Msg: be.Error(), Field: "monthly_budget_usd", RetryAfter: be.RetryAfter}
	case errors.As(err, &rf):
		return &Error{Code: apiv1.CodeUnplaceable, Msg: rf.Reason, Field: rf.Field}
	case errors.As(err, &ns):
		return &Error{Code: apiv1.CodeNotFound, Msg: ns.Error()}
	case errors.As(err, &none):
		// Each region as its own error would be answered.
		why := make([]string, len(none.Parts))
		for i, p := range none.Parts {
			why[i] = p.Region + ": " + ErrorOf(p.Err).Body().Message
		}
		return &Error{Code: apiv1.CodeUnavailable, RetryAfter: 5 * time.Second,
			Msg: peer.ErrRegionUnavailable.Error() + ": no region answered: " + strings.Join(why, "; ")}
	case errors.Is(err, peer.ErrRegionUnavailable):
		return &Error{Code: apiv1.CodeUnavailable, Msg: err.Error(), RetryAfter: 5 * time.Second}
	case errors.As(err, &perr):
		if perr.Status >= 400 && perr.Status < 600 && perr.Body.Code != "" {
			// Its Retry-After too: the holder's 503 (its Redis out) is
			// the caller's, header included. The peer is an ax server: its
			// status is its code's.
			b := perr.Body
			return &Error{Code: b.Code, Msg: b.Message, Field: b.Field, peer: &b,
				RetryAfter: time.Duration(b.RetryAfterSeconds) * time.Second}
		}
		return hidden(apiv1.CodeBadGateway, "another region's server gave an unusable answer", 0, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return &Error{Code: apiv1.CodeUnavailable, Msg: err.Error(), RetryAfter: time.Second}
	case isStoreOutage(err):
		// Redis down, out of memory, its pool exhausted: retry later.
		return hidden(apiv1.CodeUnavailable, "the task store is unavailable, retry later", 5*time.Second, err)
	}
	return hidden(apiv1.CodeInternal, "internal error", 0, err)
}

// hidden is an answer whose cause stays in the server's log: the message
// names a correlation id, the log line has the same id and the error.
func hidden(code, msg string, retryAfter time.Duration, err error) *Error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ref := hex.EncodeToString(b[:])
	return &Error{Code: code, Msg: msg + " (ref " + ref + ")", RetryAfter: retryAfter,
		Detail: err.Error(), Ref: ref}
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
	apiv1.CodeResultTooLarge:   http.StatusRequestEntityTooLarge,
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

// Body is the error as the answer's body holds it.
func (e *Error) Body() apiv1.Error {
	if e.peer != nil {
		b := *e.peer
		b.RetryAfterSeconds = e.RetryAfterSeconds()
		return b
	}
	b := apiv1.Error{Code: e.Code, Message: e.Msg, Field: e.Field, Explanation: e.Expl}
	b.RetryAfterSeconds = e.RetryAfterSeconds()
	return b
}

// Bounds of the Retry-After of a 429 or 503: a client told 0 comes back
// at once and a client told hours gives up on work that would have fit
// in seconds; what a refusal waits for (a slot, a token, a spend read, a
// dependency's return) is seconds to minutes away.
const (
	MinRetryAfter = time.Second
	MaxRetryAfter = 5 * time.Minute
)

// RetryAfterSeconds is the Retry-After the error is answered with, in
// whole seconds: for a 429 or 503 (another region's included) its
// RetryAfter rounded up and held within MinRetryAfter..MaxRetryAfter
// (MinRetryAfter when it has none); for any other status its RetryAfter
// rounded up, 0 for none.
func (e *Error) RetryAfterSeconds() int {
	d := e.RetryAfter
	if e.peer != nil {
		d = time.Duration(e.peer.RetryAfterSeconds) * time.Second
	}
	if st := e.Status(); st == http.StatusTooManyRequests || st == http.StatusServiceUnavailable {
		d = min(max(d, MinRetryAfter), MaxRetryAfter)
	}
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

func WriteError(w http.ResponseWriter, err error) {
	e := ErrorOf(err)
	if s := e.RetryAfterSeconds(); s > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
	WriteJSON(w, e.Status(), apiv1.ErrorBody{Error: e.Body()})
}

// PrefixField names a nested object's field error from the outer object:
// "tags.gpu" in "spec" becomes "spec.tags.gpu".
func PrefixField(prefix string, err error) error {
	var fe *task.FieldError
	if errors.As(err, &fe) {
		return fe.Under(prefix)
	}
	return err
}

func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}
