// Package submit is the submitting stage of a region's task store: it
// accepts new tasks into Redis (hot or in the cold tier) in one script call
// per shard, and keeps the tenants' submit quotas and backlog room.
package submit
