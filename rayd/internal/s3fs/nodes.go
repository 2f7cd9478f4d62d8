package s3fs

import (
	"context"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirNode is a directory: the keys under prefix.
type dirNode struct {
	fs.Inode
	fsys   *FS
	prefix string

	mu    sync.Mutex
	local map[string]bool // directories made here with mkdir
}

var (
	_ fs.NodeLookuper  = (*dirNode)(nil)
	_ fs.NodeReaddirer = (*dirNode)(nil)
	_ fs.NodeGetattrer = (*dirNode)(nil)
	_ fs.NodeCreater   = (*dirNode)(nil)
	_ fs.NodeUnlinker  = (*dirNode)(nil)
	_ fs.NodeMkdirer   = (*dirNode)(nil)
	_ fs.NodeRmdirer   = (*dirNode)(nil)
	_ fs.NodeRenamer   = (*dirNode)(nil)
	_ fs.NodeSymlinker = (*dirNode)(nil)
	_ fs.NodeLinker    = (*dirNode)(nil)
	_ fs.NodeMknoder   = (*dirNode)(nil)
	_ fs.NodeSetattrer = (*dirNode)(nil)
	_ fs.NodeStatfser  = (*dirNode)(nil)
)

// validName reports whether name can be a key segment.
func validName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00") && len(name) <= 255
}

func (d *dirNode) dirAttr(a *fuse.Attr) {
	mode := uint32(0o755)
	if d.fsys.o.ReadOnly {
		mode = 0o555
	}
	a.Mode = syscall.S_IFDIR | mode
	a.Nlink = 2
	a.Uid, a.Gid = d.fsys.o.UID, d.fsys.o.GID
	t := d.fsys.started
	a.SetTimes(&t, &t, &t)
}

func (d *dirNode) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.dirAttr(&out.Attr)
	return 0
}

func (d *dirNode) Setattr(ctx context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := d.fsys.refuseChange(); e != 0 {
		return e
	}
	if _, ok := in.GetMode(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetUID(); ok {
		return syscall.EPERM
	}
	if _, ok := in.GetGID(); ok {
		return syscall.EPERM
	}
	d.dirAttr(&out.Attr)
	return 0
}

func (d *dirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize, out.Frsize, out.NameLen = 4096, 4096, 255
	out.Blocks, out.Bfree, out.Bavail = 1<<40, 1<<40, 1<<40
	out.Files, out.Ffree = 1<<40, 1<<40
	return 0
}

// refuseChange is EROFS on a read-only mount.
func (f *FS) refuseChange() syscall.Errno {
	if f.o.ReadOnly {
		return syscall.EROFS
	}
	return 0
}

func (d *dirNode) newDir(ctx context.Context, name string, out *fuse.EntryOut) *fs.Inode {
	child := &dirNode{fsys: d.fsys, prefix: d.prefix + name + "/"}
	child.dirAttr(&out.Attr)
	return d.NewInode(ctx, child, fs.StableAttr{Mode: syscall.S_IFDIR})
}

func (d *dirNode) newFile(ctx context.Context, name string, size int64, mtime time.Time, etag string, out *fuse.EntryOut) *fs.Inode {
	child := &fileNode{fsys: d.fsys, key: d.prefix + name, size: size, mtime: mtime, etag: etag}
	child.fileAttr(&out.Attr)
	return d.NewInode(ctx, child, fs.StableAttr{Mode: syscall.S_IFREG})
}

func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !validName(name) {
		return nil, syscall.ENOENT
	}
	key := d.prefix + name
	one := int32(1)
	lo, err := d.fsys.list(ctx, &s3.ListObjectsV2Input{Bucket: &d.fsys.o.Bucket, Prefix: ptr(key + "/"), MaxKeys: &one})
	if err != nil {
		return nil, Errno(err)
	}
	if len(lo.Contents) > 0 || len(lo.CommonPrefixes) > 0 {
		return d.newDir(ctx, name, out), 0
	}
	h, err := d.fsys.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &d.fsys.o.Bucket, Key: &key})
	if err == nil {
		return d.newFile(ctx, name, deref(h.ContentLength), deref(h.LastModified), deref(h.ETag), out), 0
	}
	if e := Errno(err); e != syscall.ENOENT {
		return nil, e
	}
	d.mu.Lock()
	local := d.local[name]
	d.mu.Unlock()
	if local {
		return d.newDir(ctx, name, out), 0
	}
	return nil, syscall.ENOENT
}

func deref[T any](p *T) T {
	var z T
	if p == nil {
		return z
	}
	return *p
}

func (d *dirNode) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	var out []fuse.DirEntry
	seen := map[string]bool{}
	in := &s3.ListObjectsV2Input{Bucket: &d.fsys.o.Bucket, Prefix: &d.prefix, Delimiter: ptr("/")}
	for {
		lo, err := d.fsys.list(ctx, in)
		if err != nil {
			return nil, Errno(err)
		}
		for _, p := range lo.CommonPrefixes {
			name := strings.TrimSuffix(strings.TrimPrefix(deref(p.Prefix), d.prefix), "/")
			if validName(name) && !seen[name] {
				seen[name] = true
				out = append(out, fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR})
			}
		}
		for _, o := range lo.Contents {
			name := strings.TrimPrefix(deref(o.Key), d.prefix)
			if validName(name) && !seen[name] {
				seen[name] = true
				out = append(out, fuse.DirEntry{Name: name, Mode: syscall.S_IFREG})
			}
		}
		if !deref(lo.IsTruncated) || lo.NextContinuationToken == nil {
			break
		}
		in.ContinuationToken = lo.NextContinuationToken
	}
	d.mu.Lock()
	for name := range d.local {
		if !seen[name] {
			seen[name] = true
			out = append(out, fuse.DirEntry{Name: name, Mode: syscall.S_IFDIR})
		}
	}
	d.mu.Unlock()
	return fs.NewListDirStream(out), 0
}

func (d *dirNode) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := d.fsys.refuseChange(); e != 0 {
		return nil, e
	}
	if !validName(name) {
		return nil, syscall.EINVAL
	}
	d.mu.Lock()
	if d.local == nil {
		d.local = map[string]bool{}
	}
	d.local[name] = true
	d.mu.Unlock()
	return d.newDir(ctx, name, out), 0
}

func (d *dirNode) Rmdir(ctx context.Context, name string) syscall.Errno {
	if e := d.fsys.refuseChange(); e != 0 {
		return e
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.local[name] {
		// Only a directory made here, and only while nothing is in it.
		one := int32(1)
		lo, err := d.fsys.list(ctx, &s3.ListObjectsV2Input{Bucket: &d.fsys.o.Bucket, Prefix: ptr(d.prefix + name + "/"), MaxKeys: &one})
		if err != nil {
			return Errno(err)
		}
		if len(lo.Contents) > 0 {
			return syscall.ENOTEMPTY
		}
		delete(d.local, name)
		return 0
	}
	return syscall.EPERM
}

func (d *dirNode) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := d.fsys.refuseChange(); e != 0 {
		return nil, nil, 0, e
	}
	if !validName(name) {
		return nil, nil, 0, syscall.EINVAL
	}
	key := d.prefix + name
	// A key the kernel did not know of yet (another writer): replaced
	// only with AllowOverwrite.
	if _, err := d.fsys.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &d.fsys.o.Bucket, Key: &key}); err == nil {
		if !d.fsys.o.AllowOverwrite {
			return nil, nil, 0, syscall.EEXIST
		}
	} else if e := Errno(err); e != syscall.ENOENT {
		return nil, nil, 0, e
	}
	w, e := d.fsys.newWriter(key)
	if e != 0 {
		return nil, nil, 0, e
	}
	n := &fileNode{fsys: d.fsys, key: key, mtime: time.Now(), writing: w}
	w.node = n
	n.fileAttr(&out.Attr)
	return d.NewInode(ctx, n, fs.StableAttr{Mode: syscall.S_IFREG}), w, fuse.FOPEN_DIRECT_IO, 0
}

func (d *dirNode) Unlink(ctx context.Context, name string) syscall.Errno {
	if e := d.fsys.refuseChange(); e != 0 {
		return e
	}
	if !d.fsys.o.AllowDelete {
		return syscall.EPERM
	}
	key := d.prefix + name
	if _, err := d.fsys.api.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &d.fsys.o.Bucket, Key: &key}); err != nil {
		return Errno(err)
	}
	if _, err := d.fsys.api.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &d.fsys.o.Bucket, Key: &key}); err != nil {
		return Errno(err)
	}
	return 0
}

func (d *dirNode) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	if e := d.fsys.refuseChange(); e != 0 {
		return e
	}
	if flags != 0 {
		return syscall.ENOTSUP
	}
	return syscall.EPERM
}

func (d *dirNode) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := d.fsys.refuseChange(); e != 0 {
		return nil, e
	}
	return nil, syscall.EPERM
}

func (d *dirNode) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := d.fsys.refuseChange(); e != 0 {
		return nil, e
	}
	return nil, syscall.EPERM
}

func (d *dirNode) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := d.fsys.refuseChange(); e != 0 {
		return nil, e
	}
	return nil, syscall.EPERM
}
