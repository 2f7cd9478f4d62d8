package rayito

import (
	"context"
	"time"

	"connectrpc.com/connect"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

// TelemetryNames picks the metric names a sandbox exports.
type TelemetryNames string

// The name sets.
const (
	// TelemetryNamesRayito: rayito.sandbox.cpu.utilization,
	// rayito.sandbox.memory.{used,total,cache},
	// rayito.sandbox.disk.{used,total}, rayito.sandbox.processes (the
	// default).
	TelemetryNamesRayito TelemetryNames = "rayito"
	// TelemetryNamesE2B: e2b.sandbox.cpu.used_pct,
	// e2b.sandbox.mem.{used,total,cache}, e2b.sandbox.disk.{used,total},
	// e2b.sandbox.processes.
	TelemetryNamesE2B TelemetryNames = "e2b"
)

// OtlpAuth is how a sandbox's metrics export authenticates: OtlpBearer or
// OtlpExecutionRole. Its String never shows a token.
type OtlpAuth struct {
	token string
	role  bool
}

// OtlpBearer sends token as "Authorization: Bearer <token>". The token
// lives only in the sandbox daemon's memory: never in a log, an error or
// a status. Prefer it when the sandbox's code is not trusted.
func OtlpBearer(token string) OtlpAuth { return OtlpAuth{token: token} }

// OtlpExecutionRole signs the exports (SigV4) with the sandbox's execution
// role. The role's PutMetricData cannot be scoped by namespace: a
// compromised sandbox could write arbitrary metrics (security model, T23).
// Credentials the daemon cannot get show in TelemetryStatus as
// no_credentials; a daemon built without the signer refuses it
// (ReasonUnimplemented, class no_execution_role). docs/telemetry.md.
func OtlpExecutionRole() OtlpAuth { return OtlpAuth{role: true} }

// String names the kind of authentication, never the token.
func (a OtlpAuth) String() string {
	if a.role {
		return "execution_role"
	}
	return "bearer"
}

// GoString is String (a %#v never shows the token either).
func (a OtlpAuth) GoString() string { return a.String() }

// TelemetryExport configures a sandbox's OTLP/HTTP metrics export: every
// Interval (15 s to 5 min, whole seconds; ±10 % jitter) the sandbox's
// daemon POSTs seven gauges (CPU %, memory used, total and cache, disk used
// and total, processes) with the resource attributes service.name, the
// sandbox id and the image name and version, as gzipped OTLP protobuf, to
// Endpoint (https; plain http only to a loopback address).
type TelemetryExport struct {
	// Endpoint is the collector's OTLP/HTTP metrics URL (no path:
	// /v1/metrics), without userinfo.
	Endpoint string
	// Interval between exports: 15 s to 300 s.
	Interval time.Duration
	// ServiceName is service.name ("" = "rayito-sandbox").
	ServiceName string
	// Names picks the metric names ("" = TelemetryNamesRayito).
	Names TelemetryNames
	// ImageName and ImageVersion are resource attributes (optional).
	ImageName    string
	ImageVersion string
	// Auth is OtlpBearer(token) or OtlpExecutionRole().
	Auth OtlpAuth
}

// telemetryConfig is WithTelemetry's.
type telemetryConfig struct {
	telemetry *TelemetryExport
}

// WithTelemetry turns on the metrics export of a new sandbox: once it is
// ready, Create hands the configuration to its daemon
// (ConfigureService's telemetry_export). A sandbox whose export cannot be
// turned on is killed and Create fails: an invalid configuration is
// ErrInvalidArgument (its message names the field, never a value), a
// daemon that cannot serve it ReasonUnimplemented.
func WithTelemetry(t TelemetryExport) Option {
	return sandboxOption(func(c *config) { c.telemetry = &t })
}

// TelemetryStatus is a sandbox's metrics export state.
type TelemetryStatus struct {
	// Configured: a telemetry section was applied (and not turned off by
	// an empty one).
	Configured bool
	// Exported counts the batches the collector accepted, Dropped those
	// given up (queue full, refused with a 4xx, retries exhausted).
	Exported uint64
	Dropped  uint64
	// LastErrorClass is the last failure's class ("" when none): network,
	// timeout, rejected, unauthorized, server_error, no_credentials,
	// queue_full, sample.
	LastErrorClass string
}

// TelemetryStatus returns the sandbox's metrics export counters.
func (s *Sandbox) TelemetryStatus(ctx context.Context) (TelemetryStatus, error) {
	resp, err := s.dp.config.ConfigureStatus(ctx, connect.NewRequest(&raydv1.ConfigureStatusRequest{}))
	if err != nil {
		return TelemetryStatus{}, rpcErr("telemetry status", err)
	}
	for _, r := range resp.Msg.GetSections() {
		if r.GetSection() != raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT || r.GetCode() != raydv1.SectionCode_SECTION_CODE_APPLIED {
			continue
		}
		t := r.GetTelemetry()
		return TelemetryStatus{Configured: t != nil, Exported: t.GetExported(), Dropped: t.GetDropped(), LastErrorClass: t.GetLastErrorClass()}, nil
	}
	return TelemetryStatus{}, nil
}

// telemetrySection is t's wire form; the checks that need no daemon are
// made here (ErrInvalidArgument, naming the field).
func telemetrySection(t *TelemetryExport) (*raydv1.TelemetryExportConfig, error) {
	if t.Interval%time.Second != 0 || t.Interval < 15*time.Second || t.Interval > 300*time.Second {
		return nil, newError(ReasonInvalidArgument, "telemetry: Interval must be whole seconds from 15s to 300s")
	}
	m := &raydv1.TelemetryExportConfig{
		IntervalS: uint32(t.Interval / time.Second), ServiceName: t.ServiceName, Endpoint: t.Endpoint,
		ImageName: t.ImageName, ImageVersion: t.ImageVersion,
	}
	switch t.Names {
	case "", TelemetryNamesRayito:
		m.Names = raydv1.TelemetryNames_TELEMETRY_NAMES_RAYITO
	case TelemetryNamesE2B:
		m.Names = raydv1.TelemetryNames_TELEMETRY_NAMES_E2B
	default:
		return nil, newError(ReasonInvalidArgument, "telemetry: Names must be TelemetryNamesRayito or TelemetryNamesE2B")
	}
	if t.Auth.role {
		m.Auth = &raydv1.TelemetryExportConfig_ExecutionRole{ExecutionRole: &raydv1.ExecutionRoleAuth{}}
	} else {
		if t.Auth.token == "" {
			return nil, newError(ReasonInvalidArgument, "telemetry: Auth must be OtlpBearer(token) with a token, or OtlpExecutionRole()")
		}
		m.Auth = &raydv1.TelemetryExportConfig_Bearer{Bearer: &raydv1.BearerAuth{Token: t.Auth.token}}
	}
	return m, nil
}
