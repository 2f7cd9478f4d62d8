package sandbox

import (
	"reflect"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestParseMounts(t *testing.T) {
	got, err := parseMounts([]string{"/mnt/data=my-bucket", "/home/user/out=my-bucket/out:rw,overwrite", "/mnt/in=bk2/a/b/:ro"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]rayito.S3Mount{
		"/mnt/data":      {Bucket: "my-bucket"},
		"/home/user/out": {Bucket: "my-bucket", Prefix: "out/", Writable: true, AllowOverwrite: true},
		"/mnt/in":        {Bucket: "bk2", Prefix: "a/b/"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	for _, bad := range []string{"", "/mnt/x", "=b", "/mnt/x=", "/mnt/x=bkt:wx", "/mnt/x=bkt:delete", "/mnt/x=/p/",
		// The rules of proto/s3mount, checked by the CLI itself: a path
		// outside /mnt/ and /home/user/, the roots themselves, a bucket
		// with a dot or too short, a prefix with "..".
		"/etc/x=bkt", "/mnt=bkt", "/home/user=bkt", "/mnt/../etc=bkt", "/mnt/x=my.bucket", "/mnt/x=b", "/mnt/x=bkt/../p/"} {
		if _, err := parseMounts([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, bad := range [][]string{{"/mnt/a=bkt", "/mnt/a=bkc"}, {"/mnt/a=bkt", "/mnt/a/b=bkt"},
		{"/mnt/a=bkt", "/mnt/b=bkt", "/mnt/c=bkt", "/mnt/d=bkt", "/mnt/e=bkt"}} {
		if _, err := parseMounts(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzMountFlag: no value panics, and what is accepted names a bucket.
func FuzzMountFlag(f *testing.F) {
	f.Add("/mnt/data=my-bucket/p:rw,delete")
	f.Add("=:")
	f.Fuzz(func(t *testing.T, v string) {
		m, err := parseMounts([]string{v})
		if err != nil {
			return
		}
		for _, x := range m {
			if x.Bucket == "" || (x.Prefix != "" && x.Prefix[len(x.Prefix)-1] != '/') || (!x.Writable && (x.AllowDelete || x.AllowOverwrite)) {
				t.Fatalf("accepted %+v", x)
			}
		}
	})
}
