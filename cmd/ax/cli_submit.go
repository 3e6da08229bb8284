package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/internal/progress"
)

// cliMaxListed bounds the per-line errors a batch submit prints; -o json
// has them all.
const cliMaxListed = 50

func newSubmitCmd() *cobra.Command {
	var (
		sf       specFlags
		file     string
		explicit func(string) bool
	)
	c := &cobra.Command{
		Use:   "submit (--type T [flags] | -f tasks.jsonl)",
		Short: "Submit a task, or many from a JSON-lines file",
		Long: `Submit one task described by flags, or many with -f: a file of one JSON
spec per line (- for stdin), sent in batches of 1000. Every line is checked
before anything is sent; a bad line stops the submit with its line number.

One task prints its id on stdout (details on stderr); a file prints a
summary and the lines the server refused, and exits 1 if it refused any.`,
		Example: `  ax submit --type report.generate --payload '{"day":"2026-05-01"}' --tag gpu=a100 --priority 1
  ax submit --type email.send --delay 10m --idempotency-key welcome-42
  ax submit -f tasks.jsonl`,
		Args: cobra.NoArgs,
		RunE: cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
			if file != "" {
				if name, ok := sf.typed(explicit); ok {
					return cli.Usage("give -f or --%s (spec flags), not both", name)
				}
				return submitFile(ctx, env, file)
			}
			spec, err := sf.spec(env)
			if err != nil {
				return err
			}
			res, err := env.API.Submit(ctx, spec)
			if err != nil {
				showRejection(env, err)
				return err
			}
			if env.JSON {
				return env.PrintJSON(res)
			}
			fmt.Fprintln(env.Stdout, res.ID)
			fmt.Fprintf(env.Stderr, "%s\n", describeSubmit(res))
			return nil
		}),
	}
	explicit = cli.TrackExplicit(c)
	sf.register(c.Flags())
	c.Flags().StringVarP(&file, "file", "f", "", "JSON-lines file of specs, one per line (- for stdin)")
	return cliCommand(c)
}

// describeSubmit says where a submitted task stands.
func describeSubmit(r *apiv1.SubmitResponse) string {
	where := r.Region
	if r.Pool != nil {
		where += "/" + *r.Pool
	}
	s := fmt.Sprintf("%s in %s", r.State, where)
	if r.Duplicate {
		s += " (an earlier submit with this idempotency or unique key)"
	}
	return s
}

// showRejection prints the placement explanation of a 422 to stderr, so the
// one-line error that follows has its reasons above it.
func showRejection(e *cli.Env, err error) {
	var apiErr *client.APIError
	if e.JSON || !errors.As(err, &apiErr) || apiErr.Explanation == nil {
		return
	}
	w := render.Table(e.Stderr)
	render.Explanation(w, apiErr.Explanation)
	_ = w.Flush()
}

// specLine is one non-blank line of a specs file.
type specLine struct {
	no   int
	spec json.RawMessage
}

// readSpecLines splits a JSON-lines input and checks every line; it fails
// (usage, nothing sent) listing the bad ones.
func readSpecLines(e *cli.Env, path string) ([]specLine, error) {
	data, err := e.ReadInput(path)
	if err != nil {
		return nil, err
	}
	var (
		lines []specLine
		bad   []string
		nbad  int
	)
	r := bufio.NewReader(bytes.NewReader(data))
	for no := 1; ; no++ {
		line, err := r.ReadBytes('\n')
		line = bytes.TrimSpace(line)
		if len(line) > 0 {
			if _, verr := decodeSpecLine(line); verr != nil {
				nbad++
				if len(bad) < cliMaxListed {
					bad = append(bad, fmt.Sprintf("line %d: %s", no, cliFieldError(verr)))
				}
			} else {
				lines = append(lines, specLine{no: no, spec: line})
			}
		}
		if err == io.EOF {
			break
		}
	}
	if nbad > 0 {
		for _, b := range bad {
			fmt.Fprintln(e.Stderr, b)
		}
		return nil, cli.Usage("%s: %d invalid line(s); nothing was submitted", cli.InputName(path), nbad)
	}
	if len(lines) == 0 {
		return nil, cli.Usage("%s: no specs", cli.InputName(path))
	}
	return lines, nil
}

func submitFile(ctx context.Context, env *cli.Env, path string) error {
	lines, err := readSpecLines(env, path)
	if err != nil {
		return err
	}
	specs := make([]json.RawMessage, len(lines))
	for i, l := range lines {
		specs[i] = l.spec
	}
	var onSent client.Progress
	if progress.IsTerminal(env.Stderr) {
		bar := progress.New(env.Stderr, "submitting")
		defer bar.Finish()
		onSent = bar.Update
	}
	resp, sendErr := env.API.SubmitAll(ctx, specs, onSent)
	if env.JSON {
		if err := env.PrintJSON(resp); err != nil {
			return err
		}
	} else {
		w := render.Table(env.Stdout)
		writeBatchSummary(w, cli.InputName(path), lines, resp)
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if sendErr != nil {
		if n := len(resp.Results); n < len(lines) {
			return fmt.Errorf("lines %d–%d not submitted: %w", lines[n].no, lines[len(lines)-1].no, sendErr)
		}
		return sendErr
	}
	if rejected := countRejected(resp); rejected > 0 {
		return fmt.Errorf("%d of %d tasks rejected", rejected, len(lines))
	}
	return nil
}

func countRejected(resp *apiv1.BatchResponse) int {
	n := 0
	for _, r := range resp.Results {
		if r.Status < 200 || r.Status > 299 {
			n++
		}
	}
	return n
}

// writeBatchSummary prints counts, then the refused lines.
func writeBatchSummary(w *tabwriter.Writer, name string, lines []specLine, resp *apiv1.BatchResponse) {
	var created, dup int
	var refused []string
	for i, r := range resp.Results {
		switch r.Status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
			dup++
		default:
			msg := fmt.Sprintf("HTTP %d", r.Status)
			if r.Error != nil {
				// The server names fields "tasks[i].f"; the line number says i.
				field := r.Error.Field
				if _, f, ok := strings.Cut(field, "]."); ok && strings.HasPrefix(field, "tasks[") {
					field = f
				}
				msg = (&client.APIError{Status: r.Status, Code: r.Error.Code, Message: r.Error.Message, Field: field}).Error()
			}
			refused = append(refused, fmt.Sprintf("line %d:\t%s", lines[i].no, msg))
		}
	}
	fmt.Fprintf(w, "%s: %d tasks sent: %d new, %d duplicate, %d rejected\n", name, len(resp.Results), created, dup, len(refused))
	for i, r := range refused {
		if i == cliMaxListed {
			fmt.Fprintf(w, "… and %d more (-o json lists all)\n", len(refused)-cliMaxListed)
			break
		}
		fmt.Fprintln(w, r)
	}
}
