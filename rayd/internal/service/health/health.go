// Package health implements HealthService. Health is the only anonymous
// RPC; Metrics and MetricsHistory answer from a metrics.Sampler (see
// metrics.go).
package health

import (
	"context"
	"maps"
	"runtime"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1/raydv1connect"
	"github.com/rayito-dev/rayito/rayd/internal/logring"
	"github.com/rayito-dev/rayito/rayd/internal/metrics"
	"github.com/rayito-dev/rayito/rayd/internal/sandbox"
	"github.com/rayito-dev/rayito/rayd/internal/version"
)

// Service implements raydv1connect.HealthServiceHandler.
type Service struct {
	raydv1connect.UnimplementedHealthServiceHandler

	state                    *sandbox.State
	anomalies                func() uint64
	services                 []string
	memTotal                 uint64
	isolation                raydv1.Isolation
	configure, secretGateway bool
	lifecycleEvents          bool
	s3Mounts                 bool
	telemetryExport          bool
	rootAllowed              bool
	limits                   *raydv1.SandboxLimits
	metrics                  *metrics.Sampler
	lifecycle                LifecycleSource // hooks and timeout (lifecycle.go); nil: not wired
	kernel                   func() bool     // kernel_ready; nil: false
	templateReady            func() bool     // the template start command is ready; nil: no template start
	egress                   EgressSource    // nil: enforcement NONE, IMDS not blocked
	logs                     *logring.Ring   // Logs (logs.go); nil: no records
}

// EgressSource reports the network policy's enforcement (the network
// service).
type EgressSource interface {
	Enforcement() raydv1.EgressEnforcement
	IMDSBlocked() bool
	// RunNetwork is what became of the run payload's network policy.
	RunNetwork() raydv1.RunNetwork
}

// SetEgress sets where Health's egress_enforcement and imds_blocked come
// from. Call it before serving.
func (s *Service) SetEgress(e EgressSource) { s.egress = e }

// SetTemplateStart makes agent_ready wait for the template's start
// command (templatestart.Starter.Ready) and reports features.template_start.
func (s *Service) SetTemplateStart(ready func() bool) { s.templateReady = ready }

// SetKernelReady sets what Health reports as kernel_ready (the code
// service's readiness of the default kernel). Call it before serving.
func (s *Service) SetKernelReady(ready func() bool) { s.kernel = ready }

// isolations are the values of rayd's -isolation flag.
var isolations = map[string]raydv1.Isolation{
	"":         raydv1.Isolation_ISOLATION_UNSPECIFIED,
	"full":     raydv1.Isolation_ISOLATION_FULL,
	"rootless": raydv1.Isolation_ISOLATION_ROOTLESS,
	"none":     raydv1.Isolation_ISOLATION_NONE,
}

// SetIsolation sets the isolation Health reports, as the platform told
// rayd: "full", "rootless", "none", or "" for nothing said (a microVM).
// Call it before serving.
func (s *Service) SetIsolation(v string) { s.isolation = isolations[v] }

// SetSecretGateway sets features.configure (true) and
// features.secret_gateway (whether the secret gateway and placeholders
// are served here). Call it before serving.
func (s *Service) SetSecretGateway(ok bool) {
	s.configure, s.secretGateway = true, ok
}

// SetLifecycleEvents sets features.lifecycle_events: whether the
// lifecycle_events configure section is served here. Call it before
// serving.
func (s *Service) SetLifecycleEvents(ok bool) { s.lifecycleEvents = ok }

// SetTelemetryExport sets features.telemetry_export: whether the
// telemetry_export configure section is served here. Call it before
// serving.
func (s *Service) SetTelemetryExport(ok bool) { s.telemetryExport = ok }

// SetS3Mounts sets features.s3_mounts: whether the s3_mounts configure
// section can mount here (rayd as root, a mount helper, /dev/fuse). Call
// it before serving.
func (s *Service) SetS3Mounts(ok bool) { s.s3Mounts = ok }

// SetRootAllowed sets root_allowed: whether clients may run as root
// (and the sandbox's users have sudo). Call it before serving.
func (s *Service) SetRootAllowed(ok bool) { s.rootAllowed = ok }

// SetLimits sets the sandbox's own limits Health reports (0: none known).
// Call it before serving.
func (s *Service) SetLimits(memoryBytes uint64, processes uint32) {
	if memoryBytes != 0 || processes != 0 {
		s.limits = &raydv1.SandboxLimits{MemoryBytes: memoryBytes, Processes: processes}
	}
}

// New returns the service. anomalies reports the hook anomaly count;
// services names the built services, reported in features.services.
func New(state *sandbox.State, anomalies func() uint64, services []string) *Service {
	s := &Service{state: state, anomalies: anomalies, services: services}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		s.memTotal = uint64(si.Totalram) * uint64(si.Unit)
	}
	return s
}

// Health reports readiness. agent_ready is true once /run installed a valid
// configuration; sandbox_id is the microvmId /run carried.
func (s *Service) Health(_ context.Context, _ *connect.Request[raydv1.HealthRequest]) (*connect.Response[raydv1.HealthResponse], error) {
	b := s.state.Boot()
	resp := &raydv1.HealthResponse{
		AgentReady:        b != nil && (s.templateReady == nil || s.templateReady()),
		AgentVersion:      version.Version,
		UptimeMs:          uint64(s.state.Uptime().Milliseconds()),
		SandboxId:         s.state.SandboxID(),
		HookAnomalies:     s.anomalies(),
		CpuCount:          uint32(runtime.NumCPU()),
		MemoryTotalBytes:  s.memTotal,
		EgressEnforcement: raydv1.EgressEnforcement_EGRESS_ENFORCEMENT_NONE,
		RunNetwork:        raydv1.RunNetwork_RUN_NETWORK_NOT_REQUESTED,
		Lifecycle:         &raydv1.LifecycleState{Phase: raydv1.LifecyclePhase_LIFECYCLE_PHASE_UNMANAGED},
		Features:          &raydv1.AgentFeatures{Services: s.services, Configure: s.configure, SecretGateway: s.secretGateway, LifecycleEvents: s.lifecycleEvents, TelemetryExport: s.telemetryExport, S3Mounts: s.s3Mounts, TemplateStart: s.templateReady != nil},
		Isolation:         s.isolation,
		Limits:            s.limits,
		RootAllowed:       s.rootAllowed,
	}
	if b != nil {
		resp.Metadata = maps.Clone(b.Metadata)
		if s.egress == nil && b.Network != nil && b.Network.Enforce {
			// Asked for, and no network service to enforce it.
			resp.RunNetwork = raydv1.RunNetwork_RUN_NETWORK_UNAVAILABLE
		}
	}
	if s.kernel != nil {
		resp.KernelReady = s.kernel()
	}
	if s.egress != nil {
		resp.EgressEnforcement = s.egress.Enforcement()
		resp.ImdsBlocked = s.egress.IMDSBlocked()
		resp.RunNetwork = s.egress.RunNetwork()
	}
	if l := s.lifecycle; l != nil {
		st := l.HookStatus()
		resp.HookPhase = string(st.Phase)
		resp.SuspendGeneration = st.SuspendGeneration
		resp.ResumeGeneration = st.ResumeGeneration
		resp.ClockOffsetMs = st.ClockOffset.Milliseconds()
		resp.KernelStateLost = st.KernelStateLost
		resp.Lifecycle = l.Timeout()
	}
	return connect.NewResponse(resp), nil
}
