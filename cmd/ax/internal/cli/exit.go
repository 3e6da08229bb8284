package cli

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/ax-sched/ax/client"
)

// ax's exit statuses, the same for every command: a script tells the kind
// of mistake by the number.
const (
	ExitFailed = 1 // the work failed: a server refused or failed the request, a process stopped on an error
	ExitUsage  = 2 // the command line, a file or the environment is wrong: nothing was sent or started
	ExitAuth   = 3 // the server refused the credentials (401) or the role (403)
)

// ExitError carries an exit status through cobra to package main, which
// prints Err on one line and exits with Code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the status the process exits with.
func (e *ExitError) ExitCode() int { return e.Code }

// Usage is a usage error: exit status 2, no request sent.
func Usage(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// Code is the exit status of err: that of the first error in its chain
// with an ExitCode method, else ExitFailed.
func Code(err error) int {
	var c interface{ ExitCode() int }
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return ExitFailed
}

// AuthHint turns the API's 401 and 403 into exit status 3, a 401 with what
// to give: a token it does not know, or none at all.
func AuthHint(err error) error {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.Status {
	case http.StatusUnauthorized:
		return &ExitError{Code: ExitAuth, Err: fmt.Errorf("%w (give the API's token with --token or AX_TOKEN)", err)}
	case http.StatusForbidden:
		return &ExitError{Code: ExitAuth, Err: err}
	}
	return err
}
