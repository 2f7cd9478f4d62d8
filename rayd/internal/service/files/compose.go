package files

import (
	"context"
	"errors"
	"io"

	"github.com/rayito-dev/rayito/rayd/internal/rpcerr"
	"github.com/rayito-dev/rayito/rayd/internal/safefs"
)

// Compose writes the concatenation of sources, in order, to dest, as the
// user u, atomically (E2B envd's /files/compose): each source is read
// through the safe file layer as u when its turn comes, and a failure of
// any leaves dest as it was. At most MaxWriteFiles sources. Errors are
// Connect errors (rpcerr).
func (s *Service) Compose(ctx context.Context, u safefs.User, dest string, sources []string) (safefs.Entry, error) {
	if len(sources) == 0 || len(sources) > MaxWriteFiles {
		return safefs.Entry{}, rpcerr.Invalid("compose takes 1 to 1000 source paths")
	}
	src := &concatReader{ctx: ctx, s: s, u: u, paths: sources}
	defer src.close()
	e, err := s.fs.WriteFile(ctx, u, dest, src, 0, nil)
	if src.err != nil {
		return safefs.Entry{}, rpcerr.From(src.err)
	}
	if err != nil {
		return safefs.Entry{}, rpcerr.From(err)
	}
	return e, nil
}

// concatReader reads its paths one after the other, opening each when the
// one before ends. The first open or read error stops it and is kept.
type concatReader struct {
	ctx   context.Context
	s     *Service
	u     safefs.User
	paths []string
	cur   io.ReadCloser
	err   error
}

func (c *concatReader) Read(p []byte) (int, error) {
	for {
		if c.err != nil {
			return 0, c.err
		}
		if c.cur == nil {
			if len(c.paths) == 0 {
				return 0, io.EOF
			}
			rc, _, err := c.s.fs.ReadFile(c.ctx, c.u, c.paths[0])
			if err != nil {
				c.err = err
				return 0, err
			}
			c.cur, c.paths = rc, c.paths[1:]
		}
		n, err := c.cur.Read(p)
		if errors.Is(err, io.EOF) {
			c.cur.Close()
			c.cur = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		if err != nil {
			c.err = err
		}
		return n, err
	}
}

func (c *concatReader) close() {
	if c.cur != nil {
		c.cur.Close()
	}
}
