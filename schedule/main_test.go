package schedule

import (
	"testing"

	"github.com/ax-sched/ax/internal/fedtest"
)

func TestMain(m *testing.M) { fedtest.Main(m) }
