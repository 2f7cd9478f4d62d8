package sandbox

import (
	"errors"
	"fmt"
	"strings"

	ps3 "github.com/rayito-dev/rayito/proto/s3mount"
	rayito "github.com/rayito-dev/rayito/sdk"
)

// errMountFlag is a --mount value that is not PATH=BUCKET[/PREFIX][:MODE].
var errMountFlag = errors.New("--mount takes PATH=BUCKET[/PREFIX][:rw[,overwrite][,delete]]")

// parseMounts turns --mount values into WithMounts' map: PATH=BUCKET,
// PATH=BUCKET/PREFIX (a "/" is added to a prefix without one), and a
// mode after the last ':' (ro, the default; rw; rw,overwrite; rw,delete).
// Each mount and the set are checked with proto/s3mount's rules (the
// SDK's and rayd's), so that a bad value is a usage error.
func parseMounts(values []string) (map[string]rayito.S3Mount, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := map[string]rayito.S3Mount{}
	for _, v := range values {
		path, src, ok := strings.Cut(v, "=")
		if !ok || path == "" || src == "" {
			return nil, errMountFlag
		}
		var m rayito.S3Mount
		if i := strings.LastIndexByte(src, ':'); i >= 0 {
			mode := src[i+1:]
			src = src[:i]
			for _, f := range strings.Split(mode, ",") {
				switch f {
				case "ro":
				case "rw":
					m.Writable = true
				case "overwrite":
					m.AllowOverwrite = true
				case "delete":
					m.AllowDelete = true
				default:
					return nil, errMountFlag
				}
			}
			if (m.AllowOverwrite || m.AllowDelete) && !m.Writable {
				return nil, errors.New("--mount: overwrite and delete need rw")
			}
		}
		bucket, prefix, _ := strings.Cut(src, "/")
		if bucket == "" {
			return nil, errMountFlag
		}
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		m.Bucket, m.Prefix = bucket, prefix
		if _, dup := out[path]; dup {
			return nil, errors.New("--mount: the same path twice")
		}
		// The rules rayd and the SDK apply, checked here so that a bad
		// flag is a usage error (exit 2) naming what the user wrote.
		if err := ps3.Validate([]ps3.Mount{{Path: path, Bucket: m.Bucket, Prefix: m.Prefix, ReadOnly: !m.Writable,
			AllowOverwrite: m.AllowOverwrite, AllowDelete: m.AllowDelete}}); err != nil {
			var e *ps3.Error
			if errors.As(err, &e) {
				return nil, fmt.Errorf("--mount %s: %s %s", v, strings.ReplaceAll(e.Field, "mount_", ""), e.Reason)
			}
			return nil, fmt.Errorf("--mount %s: %w", v, err)
		}
		out[path] = m
	}
	all := make([]ps3.Mount, 0, len(out))
	for p, m := range out {
		all = append(all, ps3.Mount{Path: p, Bucket: m.Bucket, Prefix: m.Prefix, ReadOnly: !m.Writable})
	}
	if err := ps3.Validate(all); err != nil {
		var e *ps3.Error
		switch {
		case errors.As(err, &e) && e.Index < 0:
			return nil, errors.New("--mount: " + e.Reason)
		case errors.As(err, &e):
			// Each passed alone: two paths clash (the index is of a map's
			// order, meaningless here).
			return nil, errors.New("--mount: one path is another's or inside it")
		}
		return nil, err
	}
	return out, nil
}
