package federation

import (
	"github.com/ax-sched/ax/federation/budget"
	"github.com/ax-sched/ax/federation/fanout"
	"github.com/ax-sched/ax/federation/handoff"
	"github.com/ax-sched/ax/federation/metrics"
	"github.com/ax-sched/ax/federation/peer"
	"github.com/ax-sched/ax/federation/submit"
	"github.com/ax-sched/ax/federation/view"
)

// The parts' names as the node's callers use them.

// The global view (package view).
type (
	View       = view.View
	RegionInfo = view.RegionInfo
	ServerInfo = view.ServerInfo
)

var (
	NewView  = view.New
	Announce = view.Announce
)

// Metrics of the federation (package metrics).
type Metrics = metrics.Metrics

var NewMetrics = metrics.New

// Peers (package peer).
type PeerError = peer.Error

var (
	ErrRegionUnavailable = peer.ErrRegionUnavailable
	WithHops             = peer.WithHops
	HopsOf               = peer.HopsOf
)

// The submit pipeline (package submit).
type (
	Outcome        = submit.Outcome
	Quota          = submit.Quota
	RateError      = submit.RateError
	QuotaError     = submit.QuotaError
	PlacementError = submit.PlacementError
)

// Budgets (package budget).
type (
	Budget       = budget.Budget
	BudgetError  = budget.BudgetError
	BudgetStatus = budget.BudgetStatus
)

// Hand-offs (package handoff).
type (
	Accepted = handoff.Accepted
	Refusal  = handoff.Refusal
)

// Reads across regions (package fanout).
type (
	TaskOp                 = fanout.TaskOp
	TaskQuery              = fanout.TaskQuery
	DLQQuery               = fanout.DLQQuery
	CostQuery              = fanout.CostQuery
	CostReport             = fanout.CostReport
	DeadLetterPage         = fanout.DeadLetterPage
	BulkCanceled           = fanout.BulkCanceled
	RegionPart             = fanout.RegionPart
	NoRegionAnswered       = fanout.NoRegionAnswered
	NotServedError         = fanout.NotServedError
	HolderUnreachableError = fanout.HolderUnreachableError
)

const (
	OpCancel    = fanout.OpCancel
	OpReplay    = fanout.OpReplay
	OpPriority  = fanout.OpPriority
	MaxDLQLimit = fanout.MaxDLQLimit
)
