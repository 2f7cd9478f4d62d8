package sandbox

import (
	"reflect"
	"testing"

	rayito "github.com/rayito-dev/rayito/sdk"
)

func TestParseMounts(t *testing.T) {
	got, err := parseMounts([]string{"/mnt/data=my-bucket", "/home/user/out=my-bucket/out:rw,overwrite", "/mnt/in=b2/a/b/:ro"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]rayito.S3Mount{
		"/mnt/data":      {Bucket: "my-bucket"},
		"/home/user/out": {Bucket: "my-bucket", Prefix: "out/", Writable: true, AllowOverwrite: true},
		"/mnt/in":        {Bucket: "b2", Prefix: "a/b/"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v", got)
	}
	for _, bad := range []string{"", "/mnt/x", "=b", "/mnt/x=", "/mnt/x=b:wx", "/mnt/x=b:delete", "/mnt/x=/p/"} {
		if _, err := parseMounts([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := parseMounts([]string{"/mnt/a=b", "/mnt/a=c"}); err == nil {
		t.Error("duplicate accepted")
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
