package progress

import (
	"testing"
	"time"
)

func TestRender(t *testing.T) {
	for _, tc := range []struct {
		done, total int
		want        string
	}{
		{0, 2500, "[>         ] 0/2500   0%  1.5s"},
		{1000, 2500, "[====>     ] 1000/2500  40%  1.5s"},
		{2500, 2500, "[==========] 2500/2500 100%  1.5s"},
	} {
		if got := Render(tc.done, tc.total, 10, 1500*time.Millisecond); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
