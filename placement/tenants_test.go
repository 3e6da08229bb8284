package placement

import "testing"

// TestTenantPools: a pool that is some tenants' own takes only their tasks
// (TENANT_POOL for the others, in Place and Explain alike), even when it
// is the cheapest; a tenant whose own pool is the only match of its tags
// gets it, another tenant gets no pool at all (unplaceable, not "no
// capacity").
func TestTenantPools(t *testing.T) {
	base := cpuPool(t, "aws", "us-east-1", "m6i.xlarge")
	own := with(base, func(p *Pool) { p.Name, p.Tenants = "acme-own", []string{"acme", "initech"} })
	shared := with(base, func(p *Pool) { p.Name = "shared"; p.PricePerSlotHour += 1 })
	gpu := with(base, func(p *Pool) {
		p.Name, p.Tenants, p.Tags = "acme-gpu", []string{"acme"}, map[string]string{"gpu": "a10"}
		p.PricePerSlotHour += 2
	})
	p := mustPlacer(t, DefaultConfig(), nil)
	s := mustSnapshot(t, own, shared, gpu)
	for _, c := range []struct {
		tenant string
		tags   map[string]string
		want   string
		reason map[string]Reason
	}{
		{"acme", nil, "acme-own", map[string]Reason{"acme-own": "", "shared": "", "acme-gpu": ""}},
		{"initech", nil, "acme-own", map[string]Reason{"acme-own": "", "shared": "", "acme-gpu": ReasonTenantPool}},
		{"globex", nil, "shared", map[string]Reason{"acme-own": ReasonTenantPool, "shared": "", "acme-gpu": ReasonTenantPool}},
		{"acme", map[string]string{"gpu": "a10"}, "acme-gpu", map[string]Reason{"acme-own": ReasonTagMismatch, "shared": ReasonTagMismatch, "acme-gpu": ""}},
		{"globex", map[string]string{"gpu": "a10"}, "", map[string]Reason{"acme-own": ReasonTagMismatch, "shared": ReasonTagMismatch, "acme-gpu": ReasonTenantPool}},
	} {
		task := Task{Type: "etl", Tenant: c.tenant, Tags: c.tags}
		d := p.Place(s, task, t0)
		if d.Pool != c.want {
			t.Errorf("%s %v: placed in %q, want %q", c.tenant, c.tags, d.Pool, c.want)
		}
		if c.want == "" && d.Err() != ErrUnplaceable {
			t.Errorf("%s %v: err %v, want ErrUnplaceable", c.tenant, c.tags, d.Err())
		}
		for _, cd := range p.Explain(s, task, t0).Candidates {
			if cd.Reason != c.reason[cd.Pool] {
				t.Errorf("%s %v: %s rejected %q, want %q", c.tenant, c.tags, cd.Pool, cd.Reason, c.reason[cd.Pool])
			}
		}
	}
}
