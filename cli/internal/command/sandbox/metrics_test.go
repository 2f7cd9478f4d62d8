package sandbox

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	rayito "github.com/rayito-dev/rayito/sdk"
)

// The PROCESSES column is the sandbox's process count (every process but
// its daemon, background ones included), alone; --json keeps both counts.
func TestMetricsPrinterProcesses(t *testing.T) {
	m := &rayito.Metrics{Time: time.Unix(1_800_000_000, 0), CPUPercent: 1.5, CPUCount: 2, MemUsed: 32 << 20, MemTotal: 2 << 30,
		DiskUsed: 1 << 30, DiskTotal: 10 << 30, Processes: 2, Tasks: 3}
	var table bytes.Buffer
	p := &metricsPrinter{w: &table}
	if err := p.print(m); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	if len(lines) != 2 || !regexp.MustCompile(`^TIME +CPU +MEMORY +DISK +PROCESSES$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^\S+ +1\.5% of 2 +32 MiB / 2 GiB +1 GiB / 10 GiB +2$`).MatchString(lines[1]) {
		t.Errorf("table:\n%s", table.String())
	}
	var js bytes.Buffer
	if err := (&metricsPrinter{w: &js, json: true}).print(m); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"processes":2,"tasks":3}`) {
		t.Errorf("json: %s", js.String())
	}
}
