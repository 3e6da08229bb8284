// Command customhandler is a worker with a handler of its own, built on the
// worker SDK: it serves one pool of one region and runs tasks of type
// "greet" (payload {"name": "ada"}, result "hello, ada").
//
// The worker publishes the task types it serves with its heartbeat, so
// placement sends "greet" only to pools where a worker like this one runs,
// and the other workers of its pool never claim it. Against `ax dev`:
//
//	go run ./cmd/ax dev --no-demo-workers     # terminal 1; prints each region's Redis
//	go run ./examples/customhandler --redis 127.0.0.1:6391 --region us-east-1 --pool cpu-spot
//	go run ./cmd/ax submit --type greet --payload '{"name":"ada"}'
//	go run ./cmd/ax get <id>                   # SUCCESS, result "hello, ada"
//
// Against a real region, give its Redis address, the region's name, one of
// its pools, and the Redis password in AX_REDIS_PASSWORD (never the cluster
// token: a worker needs none). --shards must match the region's
// redis.shards.
package main
