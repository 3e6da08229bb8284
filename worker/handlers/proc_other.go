//go:build !unix

package handlers

import (
	"context"
	"errors"

	"github.com/ax-sched/ax/worker"
)

func (c *command) run(context.Context, *worker.Task, []string, []string) error {
	return worker.NonRetryable(errors.New("exec: needs a Unix system (process groups)"))
}
