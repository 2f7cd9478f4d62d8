package envdfs

import (
	"context"

	"connectrpc.com/connect"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
)

// MsgWatchers is the answer of the polling watcher RPCs.
const MsgWatchers = "filesystem.Filesystem polling watchers (CreateWatcher, GetWatcherEvents, RemoveWatcher) are not implemented in rayd's envd: use WatchDir, as the e2b JS SDK does"

func watchersUnimplemented() error {
	return rpcerr.New(raydv1.ErrorReason_ERROR_REASON_UNIMPLEMENTED, MsgWatchers)
}

// CreateWatcher is not implemented (see MsgWatchers).
func (s *Service) CreateWatcher(context.Context, *connect.Request[filesystem.CreateWatcherRequest]) (*connect.Response[filesystem.CreateWatcherResponse], error) {
	return nil, watchersUnimplemented()
}

// GetWatcherEvents is not implemented (see MsgWatchers).
func (s *Service) GetWatcherEvents(context.Context, *connect.Request[filesystem.GetWatcherEventsRequest]) (*connect.Response[filesystem.GetWatcherEventsResponse], error) {
	return nil, watchersUnimplemented()
}

// RemoveWatcher is not implemented (see MsgWatchers).
func (s *Service) RemoveWatcher(context.Context, *connect.Request[filesystem.RemoveWatcherRequest]) (*connect.Response[filesystem.RemoveWatcherResponse], error) {
	return nil, watchersUnimplemented()
}
