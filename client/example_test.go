package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ax-sched/ax/client"
	"github.com/ax-sched/ax/task"
)

// Submit a task, wait out backpressure, and tell a bad spec from the rest.
func ExampleClient_Submit() {
	c, err := client.New("http://127.0.0.1:8080", client.WithToken("t0ken"))
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	prio := 1
	spec := &task.Spec{Type: "report.generate", Priority: &prio, Tags: map[string]string{"class": "spot"}}
	for {
		res, err := c.Submit(ctx, spec)
		var apiErr *client.APIError
		switch {
		case err == nil:
			fmt.Println("submitted", res.ID, res.State)
			return
		case errors.Is(err, client.ErrSaturated) && errors.As(err, &apiErr):
			time.Sleep(apiErr.RetryAfter)
		case errors.Is(err, client.ErrInvalid) && errors.As(err, &apiErr):
			log.Fatalf("fix field %s: %s", apiErr.Field, apiErr.Message)
		default:
			log.Fatal(err)
		}
	}
}

// Follow a region's event stream.
func ExampleClient_Events() {
	c, _ := client.New("127.0.0.1:8080")
	ctx := context.Background()
	after := ""
	for ctx.Err() == nil {
		resp, err := c.Events(ctx, "eu-west", after, 20*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		for _, e := range resp.Events {
			fmt.Println(e.Op, e.N, e.Tasks)
		}
		after = resp.Next
	}
}
