package fanout

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ax-sched/ax/apiv1"
)

// The dollar figures of a cost report are whole pico-dollars, as the
// records are: a difference of two float64s is not printed with its
// rounding noise.
func TestCostFiguresAreWholePicoDollars(t *testing.T) {
	r := apiv1.CostRow{SpendUSD: 0.000018038534, ReferenceUSD: 0.000163986667}
	r.SavingsUSD = r.ReferenceUSD - r.SpendUSD
	roundPico(&r)
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"savings_usd":0.000145948133,`) {
		t.Fatalf("row %s, want savings_usd 0.000145948133", b)
	}
}
