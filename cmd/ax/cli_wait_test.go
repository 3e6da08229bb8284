package main

import (
	"strings"
	"testing"
)

func TestCLIGetWaitsForTheResult(t *testing.T) {
	done := `{"id":"t1","type":"extract","state":"SUCCESS","reason":"COMPLETED","priority":2,"tenant":"acme","region":"eu-west","held_by":"eu-west",
	  "attempts":2,"max_retries":4,"created_at":"2026-01-02T03:04:05Z","timeout":"30m0s","retry_base":"300ms","retry_cap":"30s",
	  "trace_id":"0af7651916cd43dd8448eb211c80319c","result":"{\"rows\":3}","result_expires_at":"2026-01-03T03:04:05Z",
	  "progress":{"percent":100,"message":"done","attempt":2,"updated_at":"2026-01-02T03:04:06Z"}}`
	cases := []struct {
		name     string
		result   string
		wantOut  []string
		wantErr  string
		wantCode int
	}{
		{name: "success", result: `{"id":"t1","state":"SUCCESS","done":true,"attempts":2,"result":{"rows":3}}`,
			wantOut: []string{"Progress:", "100% done (attempt 2)", `{"rows":3}`, "Result expires:"}},
		{name: "failed", result: `{"id":"t1","state":"FAILED","done":true,"reason":"RESULT_TOO_LARGE","attempts":1,"error":"the result is 70000 bytes"}`,
			wantErr: "ended FAILED (RESULT_TOO_LARGE): the result is 70000 bytes", wantCode: 1},
		{name: "not done", result: `{"id":"t1","state":"RUNNING","done":false,"attempts":1}`,
			wantErr: "not done yet", wantCode: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status := 200
			if !strings.Contains(c.result, `"done":true`) {
				status = 202
			}
			f := newCLIFakeAPI(t).on("GET /v1/tasks/t1/result", status, c.result).on("GET /v1/tasks/t1", 200, done)
			r := cliExec(t, nil, f, "", "get", "t1", "--wait", "2s")
			if r.code != c.wantCode || (c.wantErr != "" && (r.err == nil || !strings.Contains(r.err.Error(), c.wantErr))) {
				t.Fatalf("exit %d err %v, want %d %q", r.code, r.err, c.wantCode, c.wantErr)
			}
			for _, w := range c.wantOut {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
				}
			}
			seen := f.requests()
			if len(seen) < 2 || seen[0].Path != "/v1/tasks/t1/result" || !strings.HasPrefix(seen[0].Query, "wait=") {
				t.Fatalf("requests %+v", seen)
			}
		})
	}
}
