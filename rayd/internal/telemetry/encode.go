package telemetry

import (
	"bytes"
	"compress/gzip"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/rayito-dev/rayito/rayd/internal/metrics"
	"github.com/rayito-dev/rayito/rayd/internal/version"
)

// Gauge names of each name set, in the order of gauges.
var gaugeNames = map[Names][7]string{
	NamesRayito: {"rayito.sandbox.cpu.utilization", "rayito.sandbox.memory.used", "rayito.sandbox.memory.total",
		"rayito.sandbox.memory.cache", "rayito.sandbox.disk.used", "rayito.sandbox.disk.total", "rayito.sandbox.processes"},
	NamesE2B: {"e2b.sandbox.cpu.used_pct", "e2b.sandbox.mem.used", "e2b.sandbox.mem.total",
		"e2b.sandbox.mem.cache", "e2b.sandbox.disk.used", "e2b.sandbox.disk.total", "e2b.sandbox.processes"},
}

// gaugeUnits are the units of the gauges (UCUM).
var gaugeUnits = [7]string{"%", "By", "By", "By", "By", "By", "{process}"}

// Resource attribute keys of each name set: sandbox id, image name, image
// version (service.name is common).
var attrKeys = map[Names][3]string{
	NamesRayito: {"rayito.sandbox.id", "rayito.image.name", "rayito.image.version"},
	NamesE2B:    {"e2b.sandbox.id", "e2b.template.name", "e2b.template.version"},
}

// encode renders one sample as the body of an OTLP/HTTP export: an
// ExportMetricsServiceRequest (field 1: one ResourceMetrics), gzipped.
// The request message is written by hand around the ResourceMetrics: the
// otlp collector package also holds the gRPC service, which rayd does not
// link (the bytes are the same).
func encode(c Config, sandboxID string, s metrics.Sample) ([]byte, error) {
	keys := attrKeys[c.Names]
	attrs := []*commonpb.KeyValue{str("service.name", c.ServiceName), str(keys[0], sandboxID)}
	if c.ImageName != "" {
		attrs = append(attrs, str(keys[1], c.ImageName))
	}
	if c.ImageVersion != "" {
		attrs = append(attrs, str(keys[2], c.ImageVersion))
	}
	ts := uint64(s.UnixMilli) * 1e6 //nolint:gosec // a wall clock time after 1970
	names := gaugeNames[c.Names]
	values := [7]any{s.CPUPercent, s.MemUsed, s.MemTotal, s.MemCache, s.DiskUsed, s.DiskTotal, uint64(s.Processes)}
	ms := make([]*metricspb.Metric, 0, len(names))
	for i, n := range names {
		dp := &metricspb.NumberDataPoint{TimeUnixNano: ts}
		switch v := values[i].(type) {
		case float64:
			dp.Value = &metricspb.NumberDataPoint_AsDouble{AsDouble: v}
		case uint64:
			dp.Value = &metricspb.NumberDataPoint_AsInt{AsInt: int64(min(v, 1<<63-1))} //nolint:gosec // bounded
		}
		ms = append(ms, &metricspb.Metric{Name: n, Unit: gaugeUnits[i],
			Data: &metricspb.Metric_Gauge{Gauge: &metricspb.Gauge{DataPoints: []*metricspb.NumberDataPoint{dp}}}})
	}
	rm := &metricspb.ResourceMetrics{
		Resource: &resourcepb.Resource{Attributes: attrs},
		ScopeMetrics: []*metricspb.ScopeMetrics{{
			Scope:   &commonpb.InstrumentationScope{Name: "rayd", Version: version.Version},
			Metrics: ms,
		}},
	}
	b, err := proto.Marshal(rm)
	if err != nil {
		return nil, err
	}
	msg := protowire.AppendTag(nil, 1, protowire.BytesType)
	msg = protowire.AppendBytes(msg, b)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(msg); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func str(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}
