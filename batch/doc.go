// Package batch runs batches: tasks submitted together whose callback
// tasks run once when every member has ended (docs/tasks.md "Batches").
package batch
