package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"
)

// etcdSignals is what one server says about the etcds at one moment: its
// /readyz (status, global_etcd) and its two etcd gauges.
type etcdSignals struct {
	ready, readyGlobal         bool
	gaugeGlobal, gaugeRegional float64
}

func readEtcdSignals(t *testing.T, api string) etcdSignals {
	t.Helper()
	var s etcdSignals
	resp, err := http.Get(api + "/readyz")
	if err == nil {
		var body struct {
			GlobalEtcd bool `json:"global_etcd"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		s.ready, s.readyGlobal = resp.StatusCode == http.StatusOK, body.GlobalEtcd
	}
	s.gaugeGlobal = metric(t, api, "ax_global_etcd_healthy")
	s.gaugeRegional = metric(t, api, "ax_regional_etcd_healthy")
	return s
}

// etcdOutageIsReported black-holes the global etcd (calls hang, nothing
// errors: the hard case) and checks, on one server, that /readyz and
// ax_global_etcd_healthy report it within 2 s of each other and within a
// few seconds of its start (sooner than the view's watch notices, and with a
// separate global etcd too), and that both recover. shared: one etcd for everything, so the server is unready while
// it is gone; otherwise the region stays ready (it schedules its own work
// on its last view) and says global_etcd false. Submits keep being accepted
// in the region either way.
func etcdOutageIsReported(t *testing.T, fed *federation, shared bool) {
	api := fed.server("us-east-1").api
	if s := readEtcdSignals(t, api); !s.ready || !s.readyGlobal || s.gaugeGlobal != 1 || s.gaugeRegional != 1 {
		t.Fatalf("before the outage: %+v", s)
	}
	fed.globalProxy.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			fed.globalProxy.Thaw()
		}
	}()
	start := time.Now()
	var readyzAt, gaugeAt time.Duration
	for time.Since(start) < 10*time.Second && (readyzAt == 0 || gaugeAt == 0) {
		s := readEtcdSignals(t, api)
		readyzDown := !s.readyGlobal && (s.ready != shared)
		if readyzAt == 0 && readyzDown {
			readyzAt = time.Since(start)
		}
		if gaugeAt == 0 && s.gaugeGlobal == 0 {
			gaugeAt = time.Since(start)
		}
		if shared == (s.gaugeRegional == 1) && gaugeAt != 0 {
			t.Fatalf("regional gauge %v with shared=%v during the outage", s.gaugeRegional, shared)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("outage seen by /readyz after %v, by ax_global_etcd_healthy after %v", readyzAt, gaugeAt)
	if readyzAt == 0 || gaugeAt == 0 {
		t.Fatalf("outage not reported within 10 s: /readyz at %v, gauge at %v", readyzAt, gaugeAt)
	}
	if d := readyzAt - gaugeAt; d > 2*time.Second || d < -2*time.Second {
		t.Fatalf("/readyz and the gauge disagree for %v", d.Abs())
	}
	if readyzAt > 5*time.Second {
		t.Fatalf("/readyz reported the outage only after %v", readyzAt)
	}
	// The region still takes work for itself (the task's pool is local).
	if code, body := fed.call("us-east-1", tokSubmitterA, http.MethodPost, "/v1/tasks",
		map[string]any{"type": "sleep", "regions": []string{"us-east-1"}, "payload": map[string]int{"ms": 1}}); code != http.StatusCreated {
		t.Fatalf("submit during the outage: %d %s", code, body)
	}
	fed.globalProxy.Thaw()
	thawed = true
	waitUntil(t, 20*time.Second, "both report the etcd back", func() bool {
		s := readEtcdSignals(t, api)
		return s.ready && s.readyGlobal && s.gaugeGlobal == 1 && s.gaugeRegional == 1
	})
}
