package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFairShareOverride(t *testing.T) {
	r := mustParse(t, full)
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	const key = "/ax/fairshare/r1/cpu"
	got, err := r.FairShareOverride(key, "cpu", []byte(`{"default_weight": 2, "tenants": {"t1": {"weight": 3, "floor": 4, "max": 6}, "default": {}}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &FairShare{DefaultWeight: 2, Tenants: map[string]TenantShare{"t1": {Weight: 3, Floor: 4, Max: 6}, "default": {}}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("override (-want +got):\n%s", d)
	}
	if got, err := r.FairShareOverride(key, "cpu", []byte(" null ")); got != nil || err != nil {
		t.Errorf("null: %+v, %v; want off", got, err)
	}
	for _, tc := range []struct{ name, pool, value, want string }{
		{"no such pool", "tpu", `{}`, `/ax/fairshare/r1/cpu: no pool "tpu" in region r1`},
		{"unknown key", "cpu", `{"tenants": {}, "colour": 1}`, `/ax/fairshare/r1/cpu: not a fair share (JSON with default_weight and tenants, or null): json: unknown field "colour"`},
		{"not JSON", "cpu", `{"tenants":`, `/ax/fairshare/r1/cpu: not a fair share (JSON with default_weight and tenants, or null): unexpected EOF`},
		{"trailing data", "cpu", `{} {}`, `/ax/fairshare/r1/cpu: not a fair share: data after the JSON object`},
		{"zero weight written", "cpu", `{"tenants": {"t1": {"weight": 0}}}`,
			"/ax/fairshare/r1/cpu: fair_share.tenants[t1].weight: must be > 0 (leave it out for the pool's default_weight), got 0"},
		{"negative default", "cpu", `{"default_weight": -1}`, "/ax/fairshare/r1/cpu: fair_share.default_weight: must be > 0 (leave it out for 1), got -1"},
		{"floor past slots", "gpu", `{"tenants": {"t1": {"floor": 3}}}`, "/ax/fairshare/r1/cpu: fair_share.tenants[t1].floor: must be between 0 and the pool's 2 slots, got 3"},
		{"unknown tenant", "cpu", `{"tenants": {"t9": {"weight": 1}}}`, `/ax/fairshare/r1/cpu: fair_share.tenants[t9]: unknown tenant "t9": no auth.tokens entry submits for it`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := r.FairShareOverride(key, tc.pool, []byte(tc.value))
			if err == nil || err.Error() != tc.want || got != nil {
				t.Errorf("FairShareOverride(%s) = %+v, %v\nwant error %s", tc.value, got, err, tc.want)
			}
		})
	}
}
