package s3mount

import (
	"errors"
	"strings"
	"testing"
)

func ok(p, b, pre string) Mount { return Mount{Path: p, Bucket: b, Prefix: pre, ReadOnly: true} }

func TestValidate(t *testing.T) {
	long := strings.Repeat("a", 256)
	cases := []struct {
		name   string
		mounts []Mount
		field  string // "" = valid
	}{
		{"none", nil, ""},
		{"mnt", []Mount{ok("/mnt/data", "my-bucket", "")}, ""},
		{"home", []Mount{ok("/home/user/data/x", "my-bucket", "a/b/")}, ""},
		{"four", []Mount{ok("/mnt/a", "bkt", ""), ok("/mnt/b", "bkt", ""), ok("/mnt/c", "bkt", ""), ok("/mnt/d", "bkt", "")}, ""},
		{"five", []Mount{ok("/mnt/a", "bkt", ""), ok("/mnt/b", "bkt", ""), ok("/mnt/c", "bkt", ""), ok("/mnt/d", "bkt", ""), ok("/mnt/e", "bkt", "")}, "section"},
		{"empty path", []Mount{ok("", "bkt", "")}, "mount_path"},
		{"root mnt", []Mount{ok("/mnt", "bkt", "")}, "mount_path"},
		{"root mnt slash", []Mount{ok("/mnt/", "bkt", "")}, "mount_path"},
		{"home user", []Mount{ok("/home/user", "bkt", "")}, "mount_path"},
		{"other home", []Mount{ok("/home/other/x", "bkt", "")}, "mount_path"},
		{"mntx", []Mount{ok("/mntx/a", "bkt", "")}, "mount_path"},
		{"relative", []Mount{ok("mnt/a", "bkt", "")}, "mount_path"},
		{"dotdot", []Mount{ok("/mnt/../etc", "bkt", "")}, "mount_path"},
		{"dot", []Mount{ok("/mnt/./a", "bkt", "")}, "mount_path"},
		{"double slash", []Mount{ok("/mnt//a", "bkt", "")}, "mount_path"},
		{"trailing slash", []Mount{ok("/mnt/a/", "bkt", "")}, "mount_path"},
		{"long segment", []Mount{ok("/mnt/"+long, "bkt", "")}, "mount_path"},
		{"control", []Mount{ok("/mnt/a\nb", "bkt", "")}, "mount_path"},
		{"dup", []Mount{ok("/mnt/a", "bkt", ""), ok("/mnt/a", "bkt", "")}, "mount_path"},
		{"nested", []Mount{ok("/mnt/a", "bkt", ""), ok("/mnt/a/b", "bkt", "")}, "mount_path"},
		{"nested rev", []Mount{ok("/mnt/a/b", "bkt", ""), ok("/mnt/a", "bkt", "")}, "mount_path"},
		{"sibling prefix", []Mount{ok("/mnt/a", "bkt", ""), ok("/mnt/ab", "bkt", "")}, ""},
		{"bucket dots", []Mount{ok("/mnt/a", "my.bucket", "")}, "bucket"},
		{"bucket upper", []Mount{ok("/mnt/a", "MyBucket", "")}, "bucket"},
		{"bucket short", []Mount{ok("/mnt/a", "ab", "")}, "bucket"},
		{"bucket long", []Mount{ok("/mnt/a", strings.Repeat("a", 64), "")}, "bucket"},
		{"bucket dash start", []Mount{ok("/mnt/a", "-abc", "")}, "bucket"},
		{"bucket dash end", []Mount{ok("/mnt/a", "abc-", "")}, "bucket"},
		{"bucket xn", []Mount{ok("/mnt/a", "xn--abc", "")}, "bucket"},
		{"bucket alias", []Mount{ok("/mnt/a", "abc-s3alias", "")}, "bucket"},
		{"prefix leading slash", []Mount{ok("/mnt/a", "bkt", "/a/")}, "prefix"},
		{"prefix no slash", []Mount{ok("/mnt/a", "bkt", "a")}, "prefix"},
		{"prefix dotdot", []Mount{ok("/mnt/a", "bkt", "a/../")}, "prefix"},
		{"prefix empty seg", []Mount{ok("/mnt/a", "bkt", "a//")}, "prefix"},
		{"prefix only slash", []Mount{ok("/mnt/a", "bkt", "/")}, "prefix"},
		{"ro overwrite", []Mount{{Path: "/mnt/a", Bucket: "bkt", ReadOnly: true, AllowOverwrite: true}}, "read_only"},
		{"rw overwrite", []Mount{{Path: "/mnt/a", Bucket: "bkt", AllowOverwrite: true, AllowDelete: true}}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Validate(c.mounts)
			if c.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotAllowed) {
				t.Fatalf("Validate = %v, want an *Error matching ErrInvalid", err)
			}
			if got := e.Field; (c.field == "section") != (e.Index < 0) || (e.Index >= 0 && got != c.field) {
				t.Fatalf("field %q index %d, want %q", got, e.Index, c.field)
			}
			if e.Class() != ClassInvalid {
				t.Fatalf("class %q", e.Class())
			}
		})
	}
}

func TestAllowList(t *testing.T) {
	if (AllowList{}).Allows("bkt") || ParseAllowList("").Allows("bkt") || ParseAllowList(" , ").Len() != 0 {
		t.Fatal("an empty list allows something")
	}
	a := ParseAllowList(" bkt-one ,bkt-two,Bad.Name,,")
	if !a.Allows("bkt-one") || !a.Allows("bkt-two") || a.Allows("Bad.Name") || a.Len() != 2 {
		t.Fatalf("list %v", a)
	}
	u := a.Union(ParseAllowList("other"))
	if !u.Allows("other") || !u.Allows("bkt-one") || a.Allows("other") {
		t.Fatal("union")
	}
	m := []Mount{ok("/mnt/a", "bkt-one", ""), ok("/mnt/b", "nope", "")}
	err := Check(m, a)
	var e *Error
	if !errors.Is(err, ErrNotAllowed) || errors.Is(err, ErrInvalid) || !errors.As(err, &e) || e.Index != 1 || e.Class() != ClassNotAllowed {
		t.Fatalf("Check = %v", err)
	}
	if strings.Contains(err.Error(), "nope") {
		t.Fatal("the error holds the bucket")
	}
	if err := Check(m[:1], a); err != nil {
		t.Fatal(err)
	}
}

// FuzzS3Mounts checks that Validate never panics, that what it accepts
// keeps every rule, and that its errors never carry a value.
func FuzzS3Mounts(f *testing.F) {
	f.Add("/mnt/data", "my-bucket", "a/b/", "/home/user/x", "bkt", "", true, false)
	f.Add("/mnt/../etc", "My.Bucket", "/x", "/mnt", "b", "a//", false, true)
	f.Fuzz(func(t *testing.T, p1, b1, x1, p2, b2, x2 string, ro, ow bool) {
		ms := []Mount{{Path: p1, Bucket: b1, Prefix: x1, ReadOnly: ro, AllowOverwrite: ow}, {Path: p2, Bucket: b2, Prefix: x2, ReadOnly: !ro}}
		err := Validate(ms)
		if err == nil {
			for _, m := range ms {
				if !strings.HasPrefix(m.Path, "/mnt/") && !strings.HasPrefix(m.Path, "/home/user/") {
					t.Fatalf("accepted path outside the roots")
				}
				if strings.Contains(m.Path, "/../") || strings.Contains(m.Path, "//") || strings.HasSuffix(m.Path, "/..") {
					t.Fatalf("accepted unclean path")
				}
				if strings.Contains(m.Bucket, ".") || (m.Prefix != "" && !strings.HasSuffix(m.Prefix, "/")) || strings.HasPrefix(m.Prefix, "/") {
					t.Fatalf("accepted bad bucket or prefix")
				}
			}
			if nested(ms[0].Path, ms[1].Path) {
				t.Fatal("accepted nested paths")
			}
			return
		}
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("untyped error %v", err)
		}
		msg := err.Error()
		for _, v := range []string{p1, b1, x1, p2, b2, x2} {
			if len(v) > 3 && strings.Contains(msg, v) && !strings.Contains("mounts[0]mounts[1].mount_path.bucket.prefix.read_only: at most 4 mounts required not absolute not strictly under /mnt/ or /home/user/ not clean (empty segment or trailing slash) (. or .. segment) a segment is longer than 255 bytes longer than 1024 bytes not valid UTF-8 without control characters not a valid bucket name (3-63 lowercase letters, digits and hyphens, no dots) starts with / does not end with / has an empty segment has a . or .. segment allow_overwrite and allow_delete need a writable mount the same as or nested with", v) {
				t.Fatalf("error %q holds a value", msg)
			}
		}
	})
}
