package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ax-sched/ax/apiv1"
	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
	"github.com/ax-sched/ax/internal/tlsconf"
)

// HeaderTimeout bounds the wait for a server's answer to start. It is
// well above the longest long poll (MaxWait), so only a hung server trips
// it.
const HeaderTimeout = 2 * time.Minute

// MaxWait is the longest a command asks the server to hold a long poll
// (ax tail's --wait).
const MaxWait = HeaderTimeout / 2

// Env is what a client command's body gets: the API client, the output
// format, the zone of the times printed and the command's streams.
type Env struct {
	Cmd    *cobra.Command
	API    *client.Client
	JSON   bool           // -o json
	Loc    *time.Location // UTC, or the local zone (--local)
	Stdout io.Writer
	Stderr io.Writer
}

// Body is a client command's work, given its Env.
type Body func(ctx context.Context, env *Env, args []string) error

// Run adapts body to cobra: it checks --output, builds the API client and
// a context that Ctrl-C cancels, and turns a failure to reach the server
// into one line that names the address and the API's 401 and 403 into
// exit status 3.
func Run(body Body) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		out, _ := cmd.Flags().GetString("output")
		switch out {
		case "table", "":
		case "json":
		default:
			return Usage("--output %q: want table or json", out)
		}
		api, tr, err := Client(cmd)
		if err != nil {
			return err
		}
		defer tr.CloseIdleConnections()
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		env := &Env{Cmd: cmd, API: api, JSON: out == "json", Loc: time.UTC, Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr()}
		if local, _ := cmd.Flags().GetBool("local"); local {
			env.Loc = time.Local
		}
		err = body(ctx, env, args)
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return fmt.Errorf("cannot reach the ax server at %s (--api): %v", api.BaseURL(), opErr.Err)
		}
		return AuthHint(err)
	}
}

// Client builds the API client of cmd's --api, --token and TLS flags, and
// the transport it uses (close its idle connections when done).
func Client(cmd *cobra.Command) (*client.Client, *http.Transport, error) {
	addr, _ := cmd.Flags().GetString("api")
	token, _ := cmd.Flags().GetString("token")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = HeaderTimeout
	ca, _ := cmd.Flags().GetString("ca")
	cert, _ := cmd.Flags().GetString("cert")
	key, _ := cmd.Flags().GetString("key")
	if ca != "" || cert != "" || key != "" {
		tc, err := tlsconf.Client(tlsconf.Files{CA: ca, Cert: cert, Key: key})
		if err != nil {
			return nil, nil, Usage("--ca/--cert/--key: %v", strings.TrimPrefix(err.Error(), "tls: "))
		}
		tr.TLSClientConfig = tc
	}
	api, err := client.New(addr, client.WithToken(token), client.WithUserAgent("ax-cli"),
		client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return nil, nil, Usage("--api: %v", strings.TrimPrefix(err.Error(), "client: "))
	}
	return api, tr, nil
}

// TrackExplicit makes c remember which flags were typed on its command
// line, before the root's hook fills the others from AX_* env and the
// settings file; the returned func tells. Commands use it where a value
// from the environment must not change what the command does: an exported
// AX_TENANT must not turn `ax cancel` into a bulk cancel.
func TrackExplicit(c *cobra.Command) func(name string) bool {
	explicit := map[string]bool{}
	c.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		cmd.Flags().Visit(func(f *pflag.Flag) { explicit[f.Name] = true })
		if r := cmd.Root(); r != cmd && r.PersistentPreRunE != nil {
			return r.PersistentPreRunE(cmd, args)
		}
		return nil
	}
	return func(name string) bool { return explicit[name] }
}

// Show prints v as indented JSON with -o json, else calls table with a
// tabwriter on stdout.
func (e *Env) Show(v any, table func(w *tabwriter.Writer)) error {
	if e.JSON {
		return e.PrintJSON(v)
	}
	w := render.Table(e.Stdout)
	table(w)
	return w.Flush()
}

// ShowEach prints the results of a per-id action: with -o json one object
// for one id, an array for several; nothing when every id failed.
func ShowEach[T any](e *Env, done []T, ids int, table func(w *tabwriter.Writer)) error {
	if len(done) == 0 {
		return nil
	}
	if e.JSON && ids == 1 {
		return e.PrintJSON(done[0])
	}
	return e.Show(done, table)
}

// PrintJSON writes v as indented JSON; a json.RawMessage is indented as it
// is, an empty one becomes {}.
func (e *Env) PrintJSON(v any) error {
	var b []byte
	if raw, ok := v.(json.RawMessage); ok {
		if len(bytes.TrimSpace(raw)) == 0 {
			raw = json.RawMessage("{}")
		}
		var buf bytes.Buffer
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return fmt.Errorf("server answer is not JSON: %w", err)
		}
		b = buf.Bytes()
	} else {
		var err error
		if b, err = json.MarshalIndent(v, "", "  "); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(e.Stdout, "%s\n", b)
	return err
}

// Partial reports the regions a fanned-out call could not reach: one line
// each on stderr, and an error (exit 1) after the results are printed, so
// neither a reader nor a script takes a partial answer for a whole one.
func (e *Env) Partial(regions []apiv1.RegionOutcome, unavailable []string) error {
	if len(unavailable) == 0 {
		return nil
	}
	for _, r := range regions {
		if r.Error != nil {
			fmt.Fprintf(e.Stderr, "ax: region %s did not answer: %s\n", r.Region, r.Error.Message)
		}
	}
	return render.Partial(unavailable)
}

// ReadInput reads a file, or stdin for "-"; a file it cannot read is a
// usage error.
func (e *Env) ReadInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(e.Cmd.InOrStdin())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, Usage("%v", err)
	}
	return b, nil
}

// ReadJSONFile reads a JSON document given with -f.
func (e *Env) ReadJSONFile(path string) (json.RawMessage, error) {
	if path == "" {
		return nil, Usage("-f FILE is required (- for stdin)")
	}
	b, err := e.ReadInput(path)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, Usage("%s: not valid JSON", InputName(path))
	}
	return bytes.TrimSpace(b), nil
}

// InputName is how messages name an input path: stdin for "-".
func InputName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// Each runs fn for every id, printing the failures of all but the last
// to stderr, so one bad id does not stop the others. It fails when any
// did.
func (e *Env) Each(ids []string, fn func(id string) error) error {
	failed := 0
	var last error
	for _, id := range ids {
		if err := fn(id); err != nil {
			failed++
			last = err
			if len(ids) > 1 {
				fmt.Fprintf(e.Stderr, "ax: %s: %v\n", id, err)
			}
		}
	}
	switch {
	case failed == 0:
		return nil
	case len(ids) == 1:
		return last
	}
	return fmt.Errorf("%d of %d failed", failed, len(ids))
}
