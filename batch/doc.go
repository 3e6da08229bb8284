// Package batch runs batches: tasks submitted together whose callback
// tasks run once when every member has ended (docs/tasks.md "Batches").
//
// Any server accepts a batch; its region becomes the batch's home, written
// into the batch's id (the task id format). The batch's counts live in the
// home region's Redis (queue/batchstore). Its members are submitted through
// the ordinary submit pipeline (placement, hand-offs, quotas) carrying the
// batch's id, so each runs wherever it is placed. Fan-in is counted by the
// scripts that end the members: the script that moves a member to SUCCESS,
// FAILED or CANCELED, in whichever region, queues its end on its shard's
// list in the same step; each region's leader reports those lists to the
// batches' home regions (Reporter, a leader loop), whose script counts each
// member once and completes the batch with its last member, setting its
// callback due in that same step. The callback's task has an id derived
// from the batch's, so storing it twice stores it once: the server that
// completed the batch stores it at once, and the home region's leader
// stores any callback still due (a server killed in between).
//
// Boundary: batch → queue (batchstore, the ids), task, apiv1. It reaches
// the federation (submits, callbacks, other regions' servers) through
// Tasks, which federation.Node implements, and the submit pipeline
// through the SubmitFunc its caller passes; it imports neither federation
// nor httpapi.
package batch
