package fedtest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// Main is the TestMain of the federation packages' tests: go-redis's
// logging of failed dials is off (tests kill Redis on purpose), and every
// goroutine a test starts (servers, cells, views, workers, outbox senders,
// reconcilers, HTTP connections) must be gone when the tests end.
func Main(m *testing.M) {
	redis.SetLogger(quietRedis{})
	goleak.VerifyTestMain(m)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
