package queue

// FairShare is how one pool's slots are shared among tenants
// (docs/fairness.md): each tenant gets slots in proportion to its weight,
// first up to its floor (slots no other tenant's work takes while it has
// work waiting) and never more than its max (0: no ceiling). Slots a
// tenant leaves idle go to the others.
type FairShare struct {
	// DefaultWeight weighs every tenant not in Tenants (0: 1).
	DefaultWeight float64
	Tenants       map[string]TenantShare
}

// TenantShare is one tenant's part of a pool's fair share.
type TenantShare struct {
	Weight     float64 // 0: the pool's default weight
	Floor, Max int     // slots; 0: none
}
