// Package deploy holds what runs the broker elsewhere: the Helm chart
// (helm/retrybroker), the Prometheus alert rules (prometheus/), the Grafana
// dashboard (grafana/) and the image's build files (image/). It has no
// production code; its tests render the chart with helm and decode every
// object strictly into the Kubernetes API types, run promtool over the
// rules, and check against a live broker that every metric a rule or a
// panel names exists. See docs/operations.md, "Deploy on Kubernetes".
package deploy
