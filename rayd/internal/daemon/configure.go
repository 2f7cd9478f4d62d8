package daemon

import (
	"crypto/x509"
	"log/slog"
	"maps"

	"github.com/rayito-dev/rayito/gateway"
	"github.com/rayito-dev/rayito/rayd/internal/egress"
	"github.com/rayito-dev/rayito/rayd/internal/service/configure"
	"github.com/rayito-dev/rayito/rayd/internal/trustca"
)

// wireConfigure builds the configure service. Secrets are served only
// where the sandbox's code cannot read rayd's memory: rayd runs as root and
// not rootless (where rayd and the code share one uid). Placeholders also
// need the egress proxy and the firewall (then the CA goes where the
// sandbox's tools look).
func (d *Daemon) wireConfigure(cfg Config, log *slog.Logger) {
	opts := configure.Options{
		State:  d.State,
		Logger: log,
		Events: d.events,
		// The metrics export (package telemetry).
		Telemetry: d.telemetry,
		Gateway: func() gateway.Options {
			// The system roots are read now, before the sandbox's CA is
			// laid over the system bundle: the gateway never trusts it.
			roots, err := x509.SystemCertPool()
			if err != nil || roots == nil {
				roots = x509.NewCertPool()
			}
			roots.AppendCertsFromPEM(cfg.UpstreamCAs)
			return gateway.Options{RootCAs: roots, Blocked: egress.Blocked}
		},
	}
	if !d.privileged || cfg.Isolation == "rootless" {
		opts.Unsupported = configure.ClassIsolation
	}
	if d.egress != nil {
		opts.Intercept = d.Network
		opts.Proxy = d.egress.proxy
		opts.Trust = trustca.New(trustca.Options{})
	}
	if d.mounts != nil {
		opts.Mounts = d.mounts // an interface holding a nil pointer is not nil
	}
	d.Configure = configure.New(opts)
}

// processEnv is the variables every process started now gets before the
// sandbox's and its own: the proxy's, then the gateway's and the
// placeholders'.
func (d *Daemon) processEnv() map[string]string {
	p, c := d.Network.ProxyEnv(), d.Configure.Env()
	if len(c) == 0 {
		return p
	}
	out := maps.Clone(p)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, c)
	return out
}
