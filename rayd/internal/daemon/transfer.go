package daemon

import (
	"context"
	"net"
	"strconv"

	"github.com/rayito-dev/rayito/proto/localplatform"
	"github.com/rayito-dev/rayito/rayd/internal/transfer"
)

// transferPlatform is the local platform's store of transfer objects when
// rayd runs with its services (-platform-dir-fd): requests for
// localplatform.TransferHost go through the services socket, as
// persistConfig's do (the descriptor is already close-on-exec there).
// Without it, transfers reach S3 over the network only.
func transferPlatform(cfg Config) *transfer.Platform {
	if cfg.PlatformDirFD <= 2 {
		return nil
	}
	sock := "/proc/self/fd/" + strconv.Itoa(cfg.PlatformDirFD) + "/" + localplatform.ServicesSocket
	var d net.Dialer
	return &transfer.Platform{
		Host: localplatform.TransferHost,
		Dial: func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "unix", sock) },
	}
}
