// Package pick decides where tasks go on the global view: placement's
// decision for a submitted spec or a due task, narrowed by the regions
// refusing a tenant's hand-offs, the next candidate when a pool is full,
// and the admission limit the store enforces for this region's pools.
package pick
