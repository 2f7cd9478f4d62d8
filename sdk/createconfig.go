package rayito

import (
	"context"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
)

// createConfigure is Create's one Configure call: the secret gateway's
// routes, the placeholders and header rules, the lifecycle events key,
// the metrics export and the S3 mounts the options ask for go in one
// request (none asked: no call). Every section's result is checked, the
// secrets' first; the mounts, which rayd applies in the background, are
// waited for (MountWait bounds the call and the wait when there are
// mounts). An error means the sandbox must not be handed out.
func (s *Sandbox) createConfigure(ctx context.Context, cfg *config) error {
	req := &raydv1.ConfigureRequest{RequestId: newRequestID()}
	// The extensions' sections (sdk/secrets: gateway routes,
	// placeholders, header rules) come first.
	exts, err := s.configureExtensions(ctx, req)
	if err != nil {
		return err
	}
	if cfg.events != nil {
		// Its created event leaves once the daemon holds its key.
		key, err := sandboxEventsKey(ctx, cfg, s.id)
		if err != nil {
			return err
		}
		defer clear(key)
		req.LifecycleEvents = &raydv1.LifecycleEventsConfig{SandboxKey: key}
	}
	if cfg.telemetry != nil {
		sec, err := telemetrySection(cfg.telemetry)
		if err != nil {
			return err
		}
		req.TelemetryExport = sec
	}
	var mounts []ps3.Mount
	if cfg.mounts != nil {
		var err error
		if mounts, err = mountList(cfg.mounts); err != nil {
			return err
		}
		req.S3Mounts = mountsSection(mounts)
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, MountWait)
		defer cancel()
	}
	if exts == nil && req.LifecycleEvents == nil && req.TelemetryExport == nil && req.S3Mounts == nil {
		return nil
	}
	results, err := s.configure(ctx, req)
	if err != nil {
		return err
	}
	if err := s.extensionsConfigured(exts, results); err != nil {
		return err
	}
	if req.LifecycleEvents != nil {
		if err := sectionResult(results, raydv1.ConfigSection_CONFIG_SECTION_LIFECYCLE_EVENTS, "lifecycle events"); err != nil {
			return err
		}
	}
	if req.TelemetryExport != nil {
		if err := sectionResult(results, raydv1.ConfigSection_CONFIG_SECTION_TELEMETRY_EXPORT, "telemetry export"); err != nil {
			return err
		}
	}
	if mounts != nil {
		return s.waitMounts(ctx, results, mounts)
	}
	return nil
}

// sectionResult is the error of section's result in results (an answer
// without it is an internal error).
func sectionResult(results []*raydv1.SectionResult, section raydv1.ConfigSection, what string) error {
	for _, r := range results {
		if r.GetSection() == section {
			return sectionErr(r)
		}
	}
	return newError(ReasonInternal, "the sandbox did not answer for its "+what)
}
