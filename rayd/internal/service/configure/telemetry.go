package configure

import (
	"errors"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/telemetry"
)

// Telemetry is the metrics exporter (telemetry.Exporter).
type Telemetry interface {
	// Configure replaces the export's configuration; nil turns it off.
	Configure(c *telemetry.Config) error
	// Supported reports whether an authentication can be served.
	Supported(auth telemetry.AuthKind) bool
	// Status returns the export's counters.
	Status() telemetry.Status
}

// TelemetryExportSupported is Health's features.telemetry_export.
func (s *Service) TelemetryExportSupported() bool {
	return s.opts.Telemetry != nil && s.opts.Unsupported == ""
}

// applyTelemetry applies the telemetry export section: an empty section
// turns the export off; otherwise it is validated whole (INVALID names the
// field; the previous export keeps running) and replaces the export. The
// bearer token is never logged or returned.
func (s *Service) applyTelemetry(m *raydv1.TelemetryExportConfig) *raydv1.SectionResult {
	const sec = raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT
	if s.opts.Telemetry == nil {
		return unsupported(sec, ClassNotBuilt, "telemetry exports are not built in this rayd")
	}
	if s.opts.Unsupported != "" {
		return unsupported(sec, s.opts.Unsupported, "telemetry exports need the root platform: here rayd shares its user with the sandbox's code, which could read the token")
	}
	if m.GetEndpoint() == "" && m.GetIntervalS() == 0 && m.GetAuth() == nil {
		if err := s.opts.Telemetry.Configure(nil); err != nil {
			return failed(sec, ClassFailed, "the export could not be turned off")
		}
		return s.telemetryResult(&raydv1.SectionResult{Section: sec, Code: raydv1.SectionCode_SECTION_CODE_APPLIED})
	}
	c, err := telemetry.Parse(telemetry.Raw{
		IntervalS: m.GetIntervalS(), ServiceName: m.GetServiceName(), Names: int32(m.GetNames()),
		ImageName: m.GetImageName(), ImageVersion: m.GetImageVersion(), Endpoint: m.GetEndpoint(),
		ExecutionRole: m.GetExecutionRole() != nil, Bearer: m.GetBearer() != nil, Token: m.GetBearer().GetToken(),
	})
	if err != nil {
		var ce *telemetry.ConfigError
		if errors.As(err, &ce) {
			return invalid(sec, ce.Error())
		}
		return invalid(sec, "invalid configuration")
	}
	if !s.opts.Telemetry.Supported(c.Auth) {
		return unsupported(sec, ClassNoExecutionRole, "execution_role: the execution role's credentials are not available to this rayd; use bearer")
	}
	if err := s.opts.Telemetry.Configure(&c); err != nil {
		if errors.Is(err, telemetry.ErrExecutionRole) {
			return unsupported(sec, ClassNoExecutionRole, "execution_role: the execution role's credentials are not available to this rayd; use bearer")
		}
		return failed(sec, ClassFailed, "the export could not be configured; the previous one is in force")
	}
	return s.telemetryResult(&raydv1.SectionResult{Section: sec, Code: raydv1.SectionCode_SECTION_CODE_APPLIED})
}

// telemetryResult adds the export's live counters to r.
func (s *Service) telemetryResult(r *raydv1.SectionResult) *raydv1.SectionResult {
	if s.opts.Telemetry != nil {
		st := s.opts.Telemetry.Status()
		r.Telemetry = &raydv1.TelemetryStatus{Exported: st.Exported, Dropped: st.Dropped, LastErrorClass: st.LastErrorClass}
	}
	return r
}
