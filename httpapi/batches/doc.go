// Package batches serves /v1/batches: batches of tasks with callbacks
// (package batch), and the internal route by which regions report their
// members' ends to a batch's home region.
//
// Boundary: batches → httpapi/endpoint, federation (the submit path's
// types), apiv1, task; the batches themselves through Batches, which
// *batch.Batches implements.
package batches
