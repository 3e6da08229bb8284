package batchcli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/cmd/ax/internal/cli"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"github.com/spf13/cobra"
)

// Commands are submit, get, ls and cancel.
func Commands() []*cobra.Command {
	var file, name, onComplete, onSuccess, idemKey string
	submit := &cobra.Command{
		Use:   "submit -f tasks.jsonl [--on-complete SPEC] [--on-success SPEC] [--name N] [--idempotency-key K]",
		Short: "Submit tasks as one batch whose callback runs once they have all ended",
		Long: `Submit the tasks of a JSON-lines file (one spec per line, - for stdin; 1 to
10 000) as one batch. --on-complete is a task spec (JSON, or @file) that runs
once every member has ended (SUCCESS, FAILED or CANCELED); --on-success one
that runs once every member SUCCEEDED. The callback's task receives the
batch's counts and the ids of its failed and canceled members in its
payload, its own payload under "payload". Prints the batch id.

With --idempotency-key, running the command again creates nothing: it prints
the id of the batch the first run created (the key with other tasks or
callbacks is refused, 409), so a submit cut off without an answer can be
run again safely.`,
		Example: `  ax batch submit -f images.jsonl --on-complete '{"type":"report.send","payload":{"to":"ops"}}'
  ax batch submit -f images.jsonl --idempotency-key nightly-2026-12-07
  ax batch get 06f1c2d9k3m8q2zx.0.us-east-1`,
		Args: cobra.NoArgs,
	}
	submit.RunE = cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
		if file == "" {
			return cli.Usage("ax batch submit needs -f FILE (one task spec per line)")
		}
		req := apiv1.BatchCreate{Name: name, IdempotencyKey: idemKey}
		var err error
		if req.Tasks, err = readLines(env, file); err != nil {
			return err
		}
		if req.OnComplete, err = specArg(env, "on-complete", onComplete); err != nil {
			return err
		}
		if req.OnSuccess, err = specArg(env, "on-success", onSuccess); err != nil {
			return err
		}
		st, err := client.CreateBatch(ctx, env.API, req)
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintJSON(st)
		}
		fmt.Fprintln(env.Stdout, st.ID)
		for _, r := range st.Rejected {
			fmt.Fprintf(env.Stdout, "line %d refused: %s\n", r.Index+1, r.Error.Message)
		}
		return nil
	})
	submit.Flags().StringVarP(&file, "file", "f", "", "JSON-lines file of specs, one per line (- for stdin)")
	submit.Flags().StringVar(&name, "name", "", "the batch's name")
	submit.Flags().StringVar(&idemKey, "idempotency-key", "", "a repeat with this key creates nothing: it prints the first batch's id")
	submit.Flags().StringVar(&onComplete, "on-complete", "", "task spec (JSON or @file) run once every member has ended")
	submit.Flags().StringVar(&onSuccess, "on-success", "", "task spec (JSON or @file) run once every member succeeded")

	get := &cobra.Command{Use: "get ID", Short: "Show a batch: its counts by state and its callbacks", Args: cobra.ExactArgs(1)}
	get.RunE = cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
		st, err := client.GetBatch(ctx, env.API, args[0])
		if err != nil {
			return err
		}
		return show(env, st)
	})
	var limit int
	ls := &cobra.Command{Use: "ls", Short: "List the batches of every region, newest first (REGION: the batch's home)", Args: cobra.NoArgs}
	ls.Flags().IntVar(&limit, "limit", 50, "at most this many")
	ls.RunE = cli.Run(func(ctx context.Context, env *cli.Env, _ []string) error {
		list, err := client.ListBatches(ctx, env.API, limit, "")
		if err != nil {
			return err
		}
		if env.JSON {
			return env.PrintJSON(list)
		}
		w := render.Table(env.Stdout)
		fmt.Fprintln(w, "ID\tREGION\tNAME\tSTATE\tTOTAL\tOK\tFAILED\tCANCELED\tCALLBACK\tCREATED")
		for _, b := range list.Batches {
			c := b.Counts
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", b.ID, b.Region, render.Or(b.Name), b.State, c.Total, c.Succeeded,
				c.Failed, c.Canceled, b.Callback, render.Time(&b.CreatedAt, env.Loc))
		}
		if err := w.Flush(); err != nil {
			return err
		}
		return render.Partial(list.Unavailable)
	})
	cancel := &cobra.Command{Use: "cancel ID", Short: "Cancel a batch's members not ended yet (its callbacks still run once)", Args: cobra.ExactArgs(1)}
	cancel.RunE = cli.Run(func(ctx context.Context, env *cli.Env, args []string) error {
		st, err := client.CancelBatch(ctx, env.API, args[0])
		if err != nil {
			return err
		}
		return show(env, st)
	})
	return []*cobra.Command{submit, get, ls, cancel}
}

// show prints a batch.
func show(env *cli.Env, st *apiv1.BatchStatus) error {
	if env.JSON {
		return env.PrintJSON(st)
	}
	w := render.Table(env.Stdout)
	c := st.Counts
	for _, row := range [][2]string{
		{"ID", st.ID}, {"Name", st.Name}, {"Tenant", st.Tenant}, {"Region", st.Region}, {"State", st.State},
		{"Members", fmt.Sprintf("%d: %d succeeded, %d failed, %d canceled, %d unfinished", c.Total, c.Succeeded, c.Failed, c.Canceled, c.Unfinished)},
		{"Callback", st.Callback}, {"On complete", st.OnCompleteID}, {"On success", st.OnSuccessID},
		{"Created", render.Time(&st.CreatedAt, env.Loc)}, {"Completed", render.Time(st.CompletedAt, env.Loc)},
		{"Failed", strings.Join(st.Failed, " ")}, {"Canceled", strings.Join(st.Canceled, " ")},
	} {
		if row[1] != "" && row[1] != "-" {
			fmt.Fprintf(w, "%s:\t%s\n", row[0], row[1])
		}
	}
	return w.Flush()
}

// readLines reads a JSON-lines file of specs (- for stdin): each line
// must be a JSON object.
func readLines(env *cli.Env, path string) ([]json.RawMessage, error) {
	data, err := env.ReadInput(path)
	if err != nil {
		return nil, err
	}
	var out []json.RawMessage
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 2<<20)
	for no := 1; sc.Scan(); no++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if !json.Valid(line) || line[0] != '{' {
			return nil, cli.Usage("%s line %d: not a JSON object", path, no)
		}
		out = append(out, json.RawMessage(append([]byte(nil), line...)))
	}
	return out, sc.Err()
}

// specArg reads a callback flag: JSON, or @file.
func specArg(env *cli.Env, flag, v string) (json.RawMessage, error) {
	if v == "" {
		return nil, nil
	}
	b := []byte(v)
	if strings.HasPrefix(v, "@") {
		var err error
		if b, err = env.ReadInput(v[1:]); err != nil {
			return nil, err
		}
	}
	b = bytes.TrimSpace(b)
	if !json.Valid(b) || len(b) == 0 || b[0] != '{' {
		return nil, cli.Usage("--%s: not a JSON task spec", flag)
	}
	return b, nil
}
