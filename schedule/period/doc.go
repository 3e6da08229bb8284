// Package period is a schedule slot's logical period: the interval from
// the slot to the schedule's next slot, in the schedule's time zone, which
// the run of the slot processes; and the placeholders that put it into
// every task's payload ({{period_start}}, {{period_end}}, {{period_date}},
// {{schedule}}).
//
// Boundary: it imports apiv1 only; package schedule computes periods with
// its clocks and renders them here.
package period
