package config_test

import (
	"fmt"

	"github.com/ax-sched/ax/internal/config"
)

func ExampleParse() {
	_, err := config.Parse("configs/x.yaml", []byte(`
region: eu-west
auth: {enabled: false}
pools:
  - {name: cpu, slots: 16, tags: {class: spot}, spot: true}
  - {name: gpu, slots: 0}
lease: {heartbeat: 300}
`))
	fmt.Println(err)

	r, err := config.Parse("configs/eu-west.yaml", []byte(`
region: eu-west
auth: {enabled: false}
pools:
  - {name: cpu, slots: 16, price_per_slot_hour: 0.048}
`))
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Name, r.PublicAddr, r.Redis.Addr, r.Pools[0].QueueCapacity, r.Lease.Heartbeat)
	// Output:
	// configs/x.yaml: lease.heartbeat: must be a duration string such as "10s", got number 300
	// configs/x.yaml: pools[1].slots: must be > 0
	// eu-west http://127.0.0.1:8080 127.0.0.1:6379 10000 3s
}
