package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
)

// errDownloadChanged: what came through the store is not what the
// sandbox exported (its size or sha256).
var errDownloadChanged = errors.New("the download does not match the exported file's size and sha256")

// readThroughURL reads a sandbox file through the transfer store: rayd
// exports it, cp GETs it; the last Read fails unless the bytes match the
// export's size and sha256, so the local file is never put in place.
func (c *copier) readThroughURL(p string) (io.ReadCloser, error) {
	body, link, err := c.files.DownloadThroughURL(c.ctx, p)
	if err != nil {
		return nil, err
	}
	return &checkedBody{rc: body, want: link.SHA256, size: link.Size, h: sha256.New()}, nil
}

type checkedBody struct {
	rc   io.ReadCloser
	want string
	size int64
	n    int64
	h    hash.Hash
}

func (b *checkedBody) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.n += int64(n)
	b.h.Write(p[:n])
	if b.n > b.size {
		return n, errDownloadChanged
	}
	if err == io.EOF && (b.n != b.size || hex.EncodeToString(b.h.Sum(nil)) != b.want) {
		return n, errDownloadChanged
	}
	return n, err
}

func (b *checkedBody) Close() error { return b.rc.Close() }
