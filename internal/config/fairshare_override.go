package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/ax-sched/ax/internal/config/keypath"
)

// FairShareOverride decodes and checks a live override of pool's fair
// share: the JSON an operator puts at /ax/fairshare/<region>/<pool> in the
// global etcd (docs/fairness.md). It has the fair_share block's keys
// (default_weight, tenants: {name: {weight, floor, max}}), decoded strictly;
// JSON null turns the pool's fair share off (the result is nil). It is
// checked as the region file's fair_share is, against the pool's slots and
// the tokens' tenants; problems name source (the etcd key) and the key.
func (r *Region) FairShareOverride(source, pool string, b []byte) (*FairShare, error) {
	p := &problems{file: source}
	var slots int
	found := false
	for _, pl := range r.Pools {
		if pl.Name == pool {
			slots, found = pl.Slots, true
		}
	}
	if !found {
		p.add("", "no pool %q in region %s", pool, r.Name)
		return nil, p.err()
	}
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		return nil, nil
	}
	var wire struct {
		DefaultWeight *float64 `json:"default_weight"`
		Tenants       map[string]struct {
			Weight *float64 `json:"weight"`
			Floor  int      `json:"floor"`
			Max    int      `json:"max"`
		} `json:"tenants"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wire); err != nil {
		p.add("", "not a fair share (JSON with default_weight and tenants, or null): %v", err)
		return nil, p.err()
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		p.add("", "not a fair share: data after the JSON object")
		return nil, p.err()
	}
	// As in the file, a weight left out is the default; one written must be > 0.
	fs := FairShare{Tenants: map[string]TenantShare{}}
	if w := wire.DefaultWeight; w != nil {
		if !(*w > 0) {
			p.add("fair_share.default_weight", "must be > 0 (leave it out for 1), got %v", *w)
		}
		fs.DefaultWeight = *w
	}
	for name, t := range wire.Tenants {
		ts := TenantShare{Floor: t.Floor, Max: t.Max}
		if w := t.Weight; w != nil {
			if !(*w > 0) {
				p.add(keypath.Join(keypath.Entry("fair_share.tenants", name), "weight"), "must be > 0 (leave it out for the pool's default_weight), got %v", *w)
			}
			ts.Weight = *w
		}
		fs.Tenants[name] = ts
	}
	r.validateFairShare(p, "fair_share", fs, slots)
	if err := p.err(); err != nil {
		return nil, err
	}
	return &fs, nil
}
