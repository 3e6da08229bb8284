package schedule

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// Every goroutine a test starts (servers, cells, views, workers, outbox
// senders, HTTP connections) must be gone when the package's tests end.
func TestMain(m *testing.M) {
	// go-redis logs every failed dial to stderr; tests kill Redis on purpose.
	redis.SetLogger(quietRedis{})
	goleak.VerifyTestMain(m)
}

type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}
