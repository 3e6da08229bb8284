package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/internal/testenv"
)

// ax server given a Redis nobody serves exits with one line naming
// redis.addr, its value and where the value came from: the config file, or
// the variable that overrode it.
func TestServerNamesTheRedisKeyItCannotReach(t *testing.T) {
	testenv.Slow(t)
	etcd := testenv.StartEtcd(t)
	path := filepath.Join(t.TempDir(), "r1.yaml")
	region := "region: r1\nlisten: 127.0.0.1:0\nauth: {enabled: false}\npools:\n  - {name: cpu, slots: 1}\n" +
		"etcd: {regional: {endpoints: [" + etcd.Endpoint() + "]}}\nredis: {addr: 127.0.0.1:1}\n"
	if err := os.WriteFile(path, []byte(region), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, env, want string }{
		{"file", "", "redis at 127.0.0.1:1 (redis.addr, from " + path + ") does not answer"},
		{"environment", "AX_REDIS_ADDR=127.0.0.1:2", "redis at 127.0.0.1:2 (redis.addr, from AX_REDIS_ADDR) does not answer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "--settings=", "server", "--config", path)
			cmd.Env = append(withoutAXEnv(), runAsAx+"=1", c.env)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Fatalf("ax server: %v (want exit status 1)\nstderr: %s", err, stderr.String())
			}
			last := strings.TrimSpace(stderr.String())
			last = last[strings.LastIndexByte(last, '\n')+1:]
			if !strings.HasPrefix(last, "ax: "+c.want) {
				t.Errorf("last line %q; want it to start %q", last, "ax: "+c.want)
			}
		})
	}
}
