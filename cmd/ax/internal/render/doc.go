// Package render writes the API's answers as the CLI's tables and lines:
// tasks, explanations, regions, schedules, DAG runs, events and costs.
package render
