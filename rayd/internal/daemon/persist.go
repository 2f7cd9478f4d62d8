package daemon

import (
	"context"
	"net"
	"strconv"
	"syscall"

	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/rayd/internal/persist"
)

// persistConfig says where HOME persistence finds credentials and S3: the
// local platform's services socket with -platform-dir-fd, else AWS's
// instance metadata service and S3 (the zero S3Config).
func persistConfig(cfg Config) persist.S3Config {
	if cfg.PlatformDirFD <= 2 {
		return persist.S3Config{}
	}
	// The descriptor stays open (close-on-exec: no process rayd starts
	// inherits it) for rayd's lifetime; the socket is reached through it,
	// so a platform that restarts and binds the socket again is found.
	syscall.CloseOnExec(cfg.PlatformDirFD)
	sock := "/proc/self/fd/" + strconv.Itoa(cfg.PlatformDirFD) + "/" + localplatform.ServicesSocket
	var d net.Dialer
	return persist.S3Config{
		Endpoint:     "http://" + localplatform.S3Host,
		IMDSEndpoint: "http://" + localplatform.IMDSHost,
		Dial:         func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) },
	}
}
