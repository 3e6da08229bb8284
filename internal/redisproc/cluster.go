package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrCLINotFound is returned by StartCluster when redis-cli (Debian's
// redis-tools), which forms the cluster, is not on PATH.
var ErrCLINotFound = errors.New("redisproc: redis-cli not found on PATH (Debian's redis-tools)")

// Cluster is a Redis Cluster: servers started with cluster-enabled yes and
// joined by `redis-cli --cluster create`.
type Cluster struct {
	nodes   []*Server
	masters int
}

// StartCluster starts masters (≥ 3, as redis-cli requires) servers with
// opts and WithCluster, and replicas replicas of each, forms them into a
// cluster and waits until every node says cluster_state:ok, knows every
// other one and sees all 16384 slots served, and every replica is in sync,
// or until ctx ends. With WithDir, node i keeps its files in dir/node-i
// (a node started again there rejoins with its nodes.conf).
func StartCluster(ctx context.Context, masters, replicas int, opts ...Option) (*Cluster, error) {
	if masters < 3 {
		return nil, fmt.Errorf("redisproc: a cluster of %d masters; redis-cli --cluster create needs at least 3", masters)
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCLINotFound, err)
	}
	var seen config
	for _, o := range opts {
		o(&seen)
	}
	password := seen.password
	c := &Cluster{masters: masters}
	for i := range masters * (1 + replicas) {
		o := append(append([]Option(nil), opts...), WithCluster())
		if seen.dir != "" {
			o = append(o, WithDir(filepath.Join(seen.dir, "node-"+strconv.Itoa(i))))
		}
		s, err := Start(ctx, o...)
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-yes", "--cluster-replicas", strconv.Itoa(replicas))
	cmd := exec.CommandContext(ctx, cli, args...)
	if password != "" {
		cmd.Env = append(cmd.Environ(), "REDISCLI_AUTH="+password)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redisproc: redis-cli --cluster create: %v: %s", err, out)
	}
	if err := c.waitOK(ctx, password); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// waitOK polls every node: redis-cli returns once the configuration is
// sent, before every node has agreed on it.
func (c *Cluster) waitOK(ctx context.Context, password string) error {
	want := map[string]string{
		"cluster_state":          "ok",
		"cluster_slots_assigned": "16384",
		"cluster_slots_ok":       "16384",
		"cluster_known_nodes":    strconv.Itoa(len(c.nodes)),
		"cluster_size":           strconv.Itoa(c.masters),
	}
	var last string
	for {
		ok := true
		for _, n := range c.nodes {
			info, err := ask(ctx, n.Addr(), password, "CLUSTER", "INFO")
			if err != nil {
				ok, last = false, err.Error()
				break
			}
			for k, v := range want {
				if info[k] != v {
					ok, last = false, fmt.Sprintf("%s: %s=%s, want %s", n.Addr(), k, info[k], v)
					break
				}
			}
			if !ok {
				break
			}
			// A replica counts once it has synced with its master.
			if repl, err := ask(ctx, n.Addr(), password, "INFO", "replication"); err != nil ||
				repl["role"] == "slave" && repl["master_link_status"] != "up" {
				ok, last = false, fmt.Sprintf("%s: replica not in sync: %v %v", n.Addr(), repl["master_link_status"], err)
				break
			}
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisproc: cluster not ready: %s: %w", last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ask sends one node a command answering "name:value" lines (CLUSTER
// INFO, INFO) and returns them.
func ask(ctx context.Context, addr, password string, cmd ...string) (map[string]string, error) {
	d := net.Dialer{Timeout: time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	req := command(cmd...)
	if password != "" {
		req = command("AUTH", password) + req
	}
	if _, err := conn.Write([]byte(req)); err != nil {
		return nil, err
	}
	br := bufio.NewReader(conn)
	if password != "" {
		if r, err := readReply(br); err != nil || r != "+OK" {
			return nil, fmt.Errorf("%s: AUTH: %q %v", addr, r, err)
		}
	}
	r, err := readReply(br)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(r, "-") {
		return nil, fmt.Errorf("%s: %s: %s", addr, strings.Join(cmd, " "), r[1:])
	}
	info := map[string]string{}
	for _, line := range strings.Split(r, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			info[k] = v
		}
	}
	return info, nil
}

// Addrs are every node's host:port (the masters first, as formed).
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Nodes are every node's server (the masters first, as formed; a failover
// changes their roles).
func (c *Cluster) Nodes() []*Server { return c.nodes }

// Stop stops every node (each as Server.Stop). Safe to call twice.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Stop() }()
	}
	wg.Wait()
}
