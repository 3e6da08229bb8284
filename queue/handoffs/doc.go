// Package handoffs keeps the store's records of tasks crossing regions: the
// outbox of tasks sent away, the tasks held for their sender's word, and
// drains of a region's tasks to others.
package handoffs
