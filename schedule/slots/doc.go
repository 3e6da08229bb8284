// Package slots names the slots of a schedule: a cron expression
// (robfig/cron/v3's syntax with a seconds field first, the classic five
// fields, the @ descriptors, or "@every D" at the multiples of D since the
// Unix epoch) compiled in an IANA time zone, with the searches the
// federation leader and the API make over it (the next slot, the slots in
// a range, the newest before an instant). It holds no state.
package slots
