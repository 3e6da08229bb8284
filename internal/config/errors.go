package config

import (
	"fmt"
	"strings"
)

// FieldError is one problem with one key of one file. Its text is
// "file: key: message", e.g. "configs/x.yaml: pools[2].slots: must be > 0".
type FieldError struct {
	File string
	// Key is the dotted path with list indexes, e.g. "pools[2].slots";
	// empty for a problem with the file as a whole.
	Key     string
	Message string
}

func (e *FieldError) Error() string {
	if e.Key == "" {
		return e.File + ": " + e.Message
	}
	return e.File + ": " + e.Key + ": " + e.Message
}

// Errors is every problem found in one file, one per line. errors.As finds
// the first *FieldError in it.
type Errors []*FieldError

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.Is and errors.As look at each problem.
func (es Errors) Unwrap() []error {
	errs := make([]error, len(es))
	for i, e := range es {
		errs[i] = e
	}
	return errs
}

// problems collects FieldErrors for one file.
type problems struct {
	file string
	list Errors
	seen map[string]bool // keys already reported, to say each once
}

func (p *problems) add(key, format string, args ...any) {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	if key != "" && p.seen[key] {
		return
	}
	p.seen[key] = true
	p.list = append(p.list, &FieldError{File: p.file, Key: key, Message: fmt.Sprintf(format, args...)})
}

// err returns the problems as an error, or nil when there are none.
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	return p.list
}
