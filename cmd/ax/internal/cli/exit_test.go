package cli

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ax-sched/ax/client"
)

// TestExitStatuses: a usage error exits 2 however wrapped, the API's 401
// and 403 exit 3 (a 401 says what to give), anything else 1.
func TestExitStatuses(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		code int
		says string
	}{
		{"usage", Usage("--limit %d: too big", 9), ExitUsage, "--limit 9: too big"},
		{"wrapped usage", fmt.Errorf("submit: %w", Usage("no type")), ExitUsage, "submit: no type"},
		{"401", AuthHint(&client.APIError{Status: http.StatusUnauthorized, Message: "no token"}), ExitAuth, "--token or AX_TOKEN"},
		{"403", AuthHint(&client.APIError{Status: http.StatusForbidden, Message: "not yours"}), ExitAuth, "not yours"},
		{"409", AuthHint(&client.APIError{Status: http.StatusConflict, Message: "finished"}), ExitFailed, "finished"},
		{"other", AuthHint(errors.New("boom")), ExitFailed, "boom"},
	} {
		if got := Code(c.err); got != c.code || !strings.Contains(c.err.Error(), c.says) {
			t.Errorf("%s: exit %d %q, want %d and %q", c.name, got, c.err, c.code, c.says)
		}
	}
}
