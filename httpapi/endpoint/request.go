package endpoint

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/placement"
	"github.com/ax-sched/ax/task"
)

// Handler serves one endpoint for the request's principal; an error is
// answered through WriteError, the one mapping of errors to answers.
type Handler func(w http.ResponseWriter, r *http.Request, p Principal) error

// Route is one endpoint: its pattern (as http.ServeMux takes it), the
// least role that may call it, and its handler.
type Route struct {
	Pattern string
	Role    Role
	Handle  Handler
}

// Hops is the request's trusted hop count, the servers it has passed:
// set by the router from X-Ax-Forwarded, which only another ax server may
// send.
func Hops(r *http.Request) int { return peer.HopsOf(r.Context()) }

// CheckTrust refuses what only operators may ask for: priority 0 (the most
// urgent, which preempts others and is promoted first) and critical (which
// bypasses backpressure). Tokens below operator get 403 naming the field;
// other servers forward what their own caller was allowed.
func CheckTrust(sp *task.Spec, p Principal) error {
	if p.Role >= RoleOperator || p.Cluster {
		return nil
	}
	if sp.Priority != nil && *sp.Priority == 0 {
		return &Error{Code: apiv1.CodeForbidden, Field: "priority",
			Msg: "priority 0 is for operator tokens: use 1 to 4"}
	}
	if sp.Critical {
		return &Error{Code: apiv1.CodeForbidden, Field: "critical",
			Msg: "critical tasks (which bypass backpressure) are for operator tokens"}
	}
	return nil
}

// ApplyTenant checks a spec p submits (no parents, CheckTrust, a payload of at most
// maxPayload bytes) and gives it p's tenant: a token of one tenant submits
// for its own only (naming another is 403 field tenant).
func ApplyTenant(sp *task.Spec, p Principal, maxPayload int) error {
	if err := sp.RefuseInternal(); err != nil {
		return err
	}
	if err := CheckTrust(sp, p); err != nil {
		return err
	}
	if p.Tenant != "" {
		if sp.Tenant != "" && sp.Tenant != p.Tenant {
			return &Error{Code: apiv1.CodeForbidden, Msg: "this token may only submit for tenant " + p.Tenant, Field: "tenant"}
		}
		sp.Tenant = p.Tenant
	}
	if len(sp.Payload) > maxPayload {
		return &Error{Code: apiv1.CodeTooLarge, Msg: fmt.Sprintf("payload larger than %d bytes", maxPayload), Field: "payload"}
	}
	return nil
}

// Actor is who a bulk action is recorded as: the principal, or on a
// cluster-token call the caller the forwarding server names.
func Actor(r *http.Request, p Principal) string {
	if v := r.URL.Query().Get(apiv1.ParamOnBehalfOf); p.Cluster && v != "" {
		return cut(v, 128)
	}
	return p.Name
}

// cut bounds s to n bytes, dropping a rune split at the end.
func cut(s string, n int) string {
	if len(s) > n {
		return strings.ToValidUTF8(s[:n], "")
	}
	return s
}

// Outcomes are the per-region parts of a fan-out as the API answers them:
// a region that did not answer carries its error.
func Outcomes(parts []fanout.RegionPart) []apiv1.RegionOutcome {
	out := make([]apiv1.RegionOutcome, len(parts))
	for i, p := range parts {
		out[i] = apiv1.RegionOutcome{Region: p.Region, Count: p.Count}
		if p.Err != nil {
			b := ErrorOf(p.Err).Body()
			out[i].Error = &b
		}
	}
	return out
}

// ParseQuery parses a query string of a listing and refuses a parameter
// not in allowed, naming it (a typo would otherwise widen the listing).
func ParseQuery(raw string, allowed ...string) (url.Values, error) {
	v, err := url.ParseQuery(raw)
	if err != nil {
		return nil, &task.FieldError{Field: badQueryParam(raw), Msg: "malformed query: " + err.Error()}
	}
	for k := range v {
		if !slices.Contains(allowed, k) {
			return nil, &task.FieldError{Field: k, Msg: "unknown parameter (" + strings.Join(allowed, ", ") + ")"}
		}
	}
	return v, nil
}

// badQueryParam names the parameter of a query string that does not
// unescape ("" when it is the name itself).
func badQueryParam(raw string) string {
	for _, kv := range strings.Split(raw, "&") {
		k, v, _ := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return ""
		}
		if _, err := url.QueryUnescape(v); err != nil {
			return name
		}
	}
	return ""
}

// TenantOr is the tenant a spec without one gets (task.Spec.Normalize).
func TenantOr(tenant string) string {
	if tenant == "" {
		return "default"
	}
	return tenant
}

// EmptyBody accepts a request without a body, or with {}: the body of an
// action that takes no arguments.
func EmptyBody(w http.ResponseWriter, r *http.Request) error {
	b, err := ReadBody(w, r, 4<<10)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	var none struct{}
	if derr := DecodeStrict(b, &none); derr != nil {
		if derr.Fault == FaultUnknown {
			return &task.FieldError{Field: derr.Field, Msg: "unknown field: this action takes no arguments"}
		}
		return &task.FieldError{Msg: "the body must be empty or {}"}
	}
	return nil
}

// ExplanationOf is a placement explanation as the API answers it.
func ExplanationOf(ex placement.Explanation) apiv1.Explanation {
	out := apiv1.Explanation{Candidates: make([]apiv1.Candidate, 0, len(ex.Candidates)), Rule: string(ex.Rule)}
	for _, c := range ex.Candidates {
		ac := apiv1.Candidate{Region: c.Region, Pool: c.Pool, Rejected: string(c.Reason), Detail: c.Detail, PricePerSlotHour: c.Price,
			ExpectedSeconds: c.Duration.Seconds(), EstimateSource: string(c.DurationSource), Observations: c.Observations,
			SpreadSeconds: c.Spread.Seconds(), BaseCost: c.BaseCost, Penalty: c.Penalty, CrossRegion: c.CrossRegion,
			Score: c.Cost, QueueFill: c.Fill, Chosen: c.Won,
			ExpectedWaitSeconds: c.Wait.Seconds(), TasksAhead: c.Ahead, DrainPerSecond: c.DrainRate,
			WaitSource: string(c.WaitSource), WaitTargetSeconds: c.WaitTarget.Seconds(), OverWaitTarget: c.OverTarget}
		out.Candidates = append(out.Candidates, ac)
		if c.Won {
			cc := ac
			out.Chosen = &cc
		}
	}
	switch err := ex.Decision.Err(); {
	case err == nil:
		out.Outcome = "PLACED"
	case errors.Is(err, placement.ErrUnplaceable):
		out.Outcome = "UNPLACEABLE"
	case errors.Is(err, placement.ErrSaturated):
		out.Outcome = "SATURATED"
	default:
		out.Outcome = "NO_CAPACITY"
	}
	return out
}
