// Package batchcli holds the ax batch commands: submit a batch of tasks
// with its callbacks, and get, list and cancel batches. The CLI's root
// (package main) gives them its environment through Run.
package batchcli
