// Package promcheck reads the PromQL of ax's deploy artifacts — Grafana
// dashboards (deploy/grafana) and Prometheus rule files (deploy/prometheus)
// — so tests can parse every expression with Prometheus's own parser
// (promtool, from the Debian package prometheus: a recording rule per
// expression, `promtool check rules`) and check that every metric an
// expression names is one that ax exports. It keeps the huge Prometheus
// module out of go.mod.
package promcheck
