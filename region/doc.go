// Package region is a region cell: every ax server of a region runs one,
// and the one elected through the regional etcd leads, running the leader
// services (one per file: promoter, reaper, publisher, republisher,
// sweeper, preempter, cold promoter) whose every write carries the term's
// fencing token.
package region
