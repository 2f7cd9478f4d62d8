package daemon

import (
	"log/slog"
	"os"

	"github.com/rayito-dev/rayito/proto/localplatform"
	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
	ptemplate "github.com/rayito-dev/rayito/proto/template"
	"github.com/rayito-dev/rayito/rayd/internal/s3mount"
)

// wireS3Mounts builds the S3 mounts' manager where rayd can mount (root,
// not rootless). The allow-list is the union of rayd's environment
// (RAYITO_ALLOWED_MOUNT_BUCKETS: the image's, or what the local platform
// forwards from its own) and the template's variables
// (/etc/rayito/template.json, written when the template was built): both
// are set by whoever made the image, never by the sandbox's code. With
// the local platform's services (-platform-dir-fd) the helper reaches its
// metadata service and store through rayd; on AWS, the instance metadata
// service (whose block exempts only uids below 1000: the helper's 990
// reaches it) and S3.
func (d *Daemon) wireS3Mounts(cfg Config, tmpl *ptemplate.Runtime, log *slog.Logger) {
	if !d.privileged || cfg.Isolation == "rootless" {
		return
	}
	allow := ps3.ParseAllowList(cfg.AllowedMountBuckets)
	if tmpl != nil {
		allow = allow.Union(ps3.ParseAllowList(tmpl.Envs[ps3.AllowEnv]))
	}
	o := s3mount.Options{
		Helper:     cfg.MountHelper,
		FUSEDevice: cfg.FUSEDevice,
		Allow:      func() ps3.AllowList { return allow },
		OwnerUID:   1000, OwnerGID: 1000, // the sandbox's user
		Logger: log,
		// rayd's log: the helpers write fixed messages only.
		Stderr: os.Stderr,
	}
	if pc := persistConfig(cfg); pc.Dial != nil {
		o.Dial = pc.Dial
		o.Endpoint = "http://" + localplatform.S3Host
		o.IMDS = "http://" + localplatform.IMDSHost
	}
	d.mounts = s3mount.New(o)
}
