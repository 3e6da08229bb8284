package main

// Shared plumbing of the client commands (submit, get, regions, ...): the
// API client built from --api/--token, output in table or JSON, usage
// errors, input files. Names here carry a cli prefix or hang off cliEnv,
// because other files of this package belong to other commands.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/ax-sched/ax/cmd/ax/internal/render"
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

	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/internal/tlsconf"
)

// cliHeaderTimeout bounds the wait for a server's answer to start. It is
// well above the longest long poll (tail's --wait), so only a hung server
// trips it.
const cliHeaderTimeout = 2 * time.Minute

// cliEnv is what a client command's body gets: the API client, the output
// mode and the command's streams.
type cliEnv struct {
	cmd    *cobra.Command
	api    *client.Client
	json   bool
	loc    *time.Location // of the times printed: UTC, or the local zone (--local)
	stdout io.Writer
	stderr io.Writer
}

// cliRun adapts a client command's body to cobra: it checks --output,
// builds the API client and a context that Ctrl-C cancels, and turns a
// failure to reach the server into one line that names the address.
func cliRun(body func(ctx context.Context, env *cliEnv, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		out, _ := cmd.Flags().GetString("output")
		switch out {
		case "table", "":
		case "json":
		default:
			return cliUsage("--output %q: want table or json", out)
		}
		api, tr, err := cliClient(cmd)
		if err != nil {
			return err
		}
		defer tr.CloseIdleConnections()
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		env := &cliEnv{cmd: cmd, api: api, json: out == "json", loc: time.UTC, stdout: cmd.OutOrStdout(), stderr: cmd.ErrOrStderr()}
		if local, _ := cmd.Flags().GetBool("local"); local {
			env.loc = time.Local
		}
		err = body(ctx, env, args)
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return fmt.Errorf("cannot reach the ax server at %s (--api): %v", api.BaseURL(), opErr.Err)
		}
		return authHint(err)
	}
}

// cliClient builds the API client of cmd's --api, --token and TLS flags.
func cliClient(cmd *cobra.Command) (*client.Client, *http.Transport, error) {
	addr, _ := cmd.Flags().GetString("api")
	token, _ := cmd.Flags().GetString("token")
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = cliHeaderTimeout
	ca, _ := cmd.Flags().GetString("ca")
	cert, _ := cmd.Flags().GetString("cert")
	key, _ := cmd.Flags().GetString("key")
	if ca != "" || cert != "" || key != "" {
		tc, err := tlsconf.Client(tlsconf.Files{CA: ca, Cert: cert, Key: key})
		if err != nil {
			return nil, nil, cliUsage("--ca/--cert/--key: %v", strings.TrimPrefix(err.Error(), "tls: "))
		}
		tr.TLSClientConfig = tc
	}
	api, err := client.New(addr, client.WithToken(token), client.WithUserAgent("ax-cli"),
		client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		return nil, nil, cliUsage("--api: %v", strings.TrimPrefix(err.Error(), "client: "))
	}
	return api, tr, nil
}

// cliUsage is a usage error: exit status 2, no request sent.
func cliUsage(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// cliCommand marks a client command (flag and argument errors are usage
// errors for every command: unifyUsage).
func cliCommand(c *cobra.Command) *cobra.Command { return c }

// cliTrackExplicit makes c remember which flags were typed on its command
// line, before the root's hook (bindViper) fills the others from AX_* env
// and the settings file; the returned func tells. Commands use it where a
// value from the environment must not change what the command does: an
// exported AX_TENANT must not turn `ax cancel` into a bulk cancel.
func cliTrackExplicit(c *cobra.Command) func(name string) bool {
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

// show prints v as indented JSON with -o json, else calls table with a
// tabwriter on stdout.
func (e *cliEnv) show(v any, table func(w *tabwriter.Writer)) error {
	if e.json {
		return e.printJSON(v)
	}
	w := render.Table(e.stdout)
	table(w)
	return w.Flush()
}

// printJSON writes v as indented JSON; a json.RawMessage is indented as it
// is, an empty one becomes {}.
func (e *cliEnv) printJSON(v any) error {
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
	_, err := fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}

// readInput reads a file, or stdin for "-".
func (e *cliEnv) readInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(e.cmd.InOrStdin())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, cliUsage("%v", err)
	}
	return b, nil
}

// readJSONFile reads a JSON document given with -f.
func (e *cliEnv) readJSONFile(path string) (json.RawMessage, error) {
	if path == "" {
		return nil, cliUsage("-f FILE is required (- for stdin)")
	}
	b, err := e.readInput(path)
	if err != nil {
		return nil, err
	}
	if !json.Valid(b) {
		return nil, cliUsage("%s: not valid JSON", cliInputName(path))
	}
	return bytes.TrimSpace(b), nil
}

func cliInputName(path string) string {
	if path == "-" {
		return "stdin"
	}
	return path
}

// each runs fn for every id, printing the failures of all but the last
// to stderr, so one bad id does not stop the others. It fails when any
// did.
func (e *cliEnv) each(ids []string, fn func(id string) error) error {
	failed := 0
	var last error
	for _, id := range ids {
		if err := fn(id); err != nil {
			failed++
			last = err
			if len(ids) > 1 {
				fmt.Fprintf(e.stderr, "ax: %s: %v\n", id, err)
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
