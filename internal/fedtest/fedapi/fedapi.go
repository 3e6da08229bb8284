// Package fedapi is test support: fedtest's federation with every region's
// server answering through the real HTTP API (package httpapi), wired as
// cmd/ax/runtime.go wires it, behind the harness's tokens (Auth).
//
// Boundary: it imports httpapi and fedtest (which imports federation), so
// neither it nor fedtest imports two of {federation, schedule, dag,
// httpapi}; like fedtest it is imported by tests only.
package fedapi

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/ax-sched/ax/httpapi"
	"github.com/ax-sched/ax/internal/fedtest"
	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// New starts fedtest's federation of three regions serving httpapi.
func New(t *testing.T, opts ...fedtest.Option) *fedtest.Fed {
	t.Helper()
	return fedtest.New(t, func(s *fedtest.Server) http.Handler { return httpapi.New(s.Node, Config(s)) }, opts...)
}

// Auth is the harness's auth config: one token per fedtest.Tok* constant.
func Auth() *httpapi.Auth {
	return &httpapi.Auth{Enabled: true, ClusterToken: fedtest.TokCluster, Tokens: []httpapi.Token{
		{Name: "acme-ci", SHA256: httpapi.HashToken(fedtest.TokAcme), Role: httpapi.RoleSubmitter, Tenant: "acme"},
		{Name: "globex-ci", SHA256: httpapi.HashToken(fedtest.TokGlobex), Role: httpapi.RoleSubmitter, Tenant: "globex"},
		{Name: "globex-ops", SHA256: httpapi.HashToken(fedtest.TokGlobexOps), Role: httpapi.RoleOperator, Tenant: "globex"},
		{Name: "oncall", SHA256: httpapi.HashToken(fedtest.TokOperator), Role: httpapi.RoleOperator},
		{Name: "root", SHA256: strings.ToUpper(httpapi.HashToken(fedtest.TokAdmin)), Role: httpapi.RoleAdmin},
	}}
}

// Config is the API config of a harness server: its registry, its region's
// pools, readiness from etcd, the harness's tokens.
func Config(s *fedtest.Server) httpapi.Config {
	var names []string
	for _, p := range s.Region.Pools {
		names = append(names, p.Name)
	}
	cli := s.Cli
	return httpapi.Config{Auth: Auth(), Gatherer: s.Reg, Registerer: s.Reg, Pools: names,
		Ready: func(ctx context.Context) error {
			_, err := cli.Get(clientv3.WithRequireLeader(ctx), "/ax/ready-probe")
			return err
		}}
}

// ServeSchedules makes the region's server serve the schedule endpoints
// through sc from now on, as a server started with it would. (The new API's
// request counter is not in the server's registry: the first one's is.)
func ServeSchedules(r *fedtest.Region, sc httpapi.Schedules) {
	s := r.Server()
	cfg := Config(s)
	cfg.Schedules, cfg.Registerer = sc, prometheus.NewRegistry()
	s.Serve(httpapi.New(s.Node, cfg))
}
