// Package envdfs serves E2B envd's filesystem.Filesystem service (the E2B
// shim's envd port) by calling rayd's own FilesystemService (package
// files), and so the safe file layer with its path rules, identity
// switching and deny lists, only in E2B's shapes. One file per RPC. The
// user comes from `Authorization: Basic base64("<user>:")` (default: the
// sandbox's default user).
package envdfs

import (
	"net/http"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem"
	"github.com/rayito-dev/rayito/proto/gen/envd/filesystem/filesystemconnect"
	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
	"github.com/rayito-dev/rayito/rayd/internal/envduser"
	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/service/files"
)

// Service implements filesystemconnect.FilesystemHandler.
type Service struct {
	files *files.Service
}

var _ filesystemconnect.FilesystemHandler = (*Service)(nil)

// New returns the service over rayd's file service.
func New(f *files.Service) *Service { return &Service{files: f} }

// user returns the request's user for rayd's file service.
func user(h http.Header) (*raydv1.User, error) {
	u, err := envduser.FromHeader(h)
	if err != nil {
		return nil, rpcerr.Invalid("invalid Authorization header: expected Basic credentials naming a user")
	}
	if u == "" {
		return nil, nil
	}
	return &raydv1.User{Username: u}, nil
}

// entry renders one of rayd's entries in E2B's shape.
func entry(e *raydv1.EntryInfo) *filesystem.EntryInfo {
	if e == nil {
		return nil
	}
	return &filesystem.EntryInfo{
		Name:          e.GetName(),
		Type:          fileType(e.GetType()),
		Path:          e.GetPath(),
		Size:          e.GetSize(),
		Mode:          e.GetMode(),
		Permissions:   e.GetPermissions(),
		Owner:         e.GetOwner(),
		Group:         e.GetGroup(),
		ModifiedTime:  timestamppb.New(time.UnixMilli(e.GetModifiedTimeUnixMs())),
		SymlinkTarget: e.SymlinkTarget,
		Metadata:      e.GetMetadata(),
	}
}

func fileType(t raydv1.FileType) filesystem.FileType {
	switch t {
	case raydv1.FileType_FILE_TYPE_FILE:
		return filesystem.FileType_FILE_TYPE_FILE
	case raydv1.FileType_FILE_TYPE_DIRECTORY:
		return filesystem.FileType_FILE_TYPE_DIRECTORY
	case raydv1.FileType_FILE_TYPE_SYMLINK:
		return filesystem.FileType_FILE_TYPE_SYMLINK
	}
	return filesystem.FileType_FILE_TYPE_UNSPECIFIED
}
