package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// children lists the pids whose parent is pid.
func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	return s[strings.LastIndexByte(s, ')')+2] != 'Z'
}

// `ax dev`: start it, wait for /readyz, submit 100 tasks across the three
// regions, all SUCCESS, stop it with SIGINT, and no child process is left.
func TestDevSmoke(t *testing.T) {
	// --port 0: ax dev binds three free ports itself before it starts its
	// Redis and etcd children, and prints them. A port chosen here could be
	// taken by another test's process before ax dev binds it.
	var log lockedBuffer
	cmd := exec.Command(axBin, "dev", "--tmp", "--port", "0")
	cmd.Stdout, cmd.Stderr = &log, &log
	cmd.Env = append(os.Environ(), "AX_LOG_FORMAT=text")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{}) // closed once ax dev has been reaped
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		if t.Failed() {
			t.Logf("ax dev log:\n%s", tail(log.String(), 4000))
		}
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Errorf("ax dev (pid %d) still not reaped after SIGKILL", cmd.Process.Pid)
			}
		}
	}()
	var api string
	waitUntil(t, 60*time.Second, "ax dev to print its API address", func() bool {
		m := devAPI.FindStringSubmatch(log.String())
		if m != nil {
			api = m[1]
		}
		return m != nil
	})
	waitUntil(t, 60*time.Second, "ax dev /readyz", func() bool {
		resp, err := http.Get(api + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	waitUntil(t, 30*time.Second, "three healthy regions", func() bool {
		var r struct {
			Regions []struct {
				Name    string `json:"name"`
				Healthy bool   `json:"healthy"`
				Pools   []struct {
					Slots int `json:"slots"`
				} `json:"pools"`
			} `json:"regions"`
		}
		if getJSON(api+"/v1/regions", &r) != nil || len(r.Regions) != 3 {
			return false
		}
		for _, g := range r.Regions {
			if !g.Healthy || len(g.Pools) == 0 || g.Pools[0].Slots == 0 {
				return false
			}
		}
		return true
	})
	regions := []string{"us-east-1", "europe-west4", "eastus"}
	var ids []string
	for i := 0; i < 100; i++ {
		body := fmt.Sprintf(`{"type":"noop","regions":[%q],"tags":{"cpu":"x86"}}`, regions[i%3])
		resp, err := http.Post(api+"/v1/tasks", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			ID     string `json:"id"`
			Region string `json:"region"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if resp.StatusCode != 201 || r.ID == "" {
			t.Fatalf("submit %d: status %d", i, resp.StatusCode)
		}
		if r.Region != regions[i%3] {
			t.Fatalf("task placed in %s, want %s", r.Region, regions[i%3])
		}
		ids = append(ids, r.ID)
	}
	waitUntil(t, 60*time.Second, "100 SUCCESS", func() bool {
		for _, id := range ids {
			var tk struct {
				State string `json:"state"`
			}
			if getJSON(api+"/v1/tasks/"+id, &tk) != nil || tk.State != "SUCCESS" {
				return false
			}
		}
		return true
	})
	kids := children(cmd.Process.Pid)
	t.Logf("ax dev children before SIGINT: %v", kids)
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("ax dev did not stop within 30 s of SIGINT")
	}
	for _, k := range kids {
		if alive(k) {
			t.Fatalf("child %d of ax dev still runs after it stopped", k)
		}
	}
	if !strings.Contains(log.String(), "ax dev stopped.") {
		t.Fatal("ax dev did not report a clean stop")
	}
}

// devAPI finds the first region's API in ax dev's banner.
var devAPI = regexp.MustCompile(`us-east-1\s+API (http://127\.0\.0\.1:\d+)`)

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s: %d", url, resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
