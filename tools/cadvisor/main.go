// A minimal cAdvisor: the library module github.com/google/cadvisor (v0.49.1, the
// last with manager and metrics in it) around manager.New and
// metrics.NewPrometheusCollector (and NewPrometheusMachineCollector), serving /metrics. With no container runtime it
// reports every raw cgroup as a container labelled by its path (`id`), as the
// cadvisor binary does (its module, .../cadvisor/cmd, is not served by the Go
// proxy here). Usage: cadvisor [-listen 127.0.0.1:8080] [-housekeeping 1s]
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/google/cadvisor/cache/memory"
	"github.com/google/cadvisor/container"
	v2 "github.com/google/cadvisor/info/v2"
	"github.com/google/cadvisor/manager"
	"github.com/google/cadvisor/metrics"
	"github.com/google/cadvisor/utils/sysfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/utils/clock"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to serve /metrics on")
	housekeeping := flag.Duration("housekeeping", time.Second, "how often each cgroup's counters are read")
	flag.Parse()

	// What the kubelet's cAdvisor exports for CPU: cpu (usage, cfs periods,
	// throttling), the spec (quota, period) and process (container_threads);
	// and, as the kubelet does, the machine's (machine_cpu_cores: the node's
	// logical CPUs, which throttled seconds grow with).
	included := container.MetricSet{
		container.CpuUsageMetrics: struct{}{},
		container.ProcessMetrics:  struct{}{},
	}
	allowDynamic := false
	m, err := manager.New(memory.New(2*time.Minute, nil), sysfs.NewRealSysFs(),
		manager.HousekeepingConfig{Interval: housekeeping, AllowDynamic: &allowDynamic},
		included, http.DefaultClient, []string{"/"}, nil, "", 0)
	if err != nil {
		log.Fatalf("cadvisor: manager: %v", err)
	}
	if err := m.Start(); err != nil {
		log.Fatalf("cadvisor: start: %v", err)
	}
	defer m.Stop()

	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics.NewPrometheusCollector(m, metrics.DefaultContainerLabels, included,
		clock.RealClock{}, v2.RequestOptions{IdType: v2.TypeName, Count: 1, Recursive: true}))
	registry.MustRegister(metrics.NewPrometheusMachineCollector(m, included))
	http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	log.Printf("cadvisor: serving /metrics on %s", *listen)
	log.Fatal(http.ListenAndServe(*listen, nil))
}
