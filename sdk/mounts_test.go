package rayito

import (
	"errors"
	"strings"
	"testing"

	raydv1 "github.com/rayito-dev/rayito/proto/gen/rayito/rayd/v1"
)

func TestMountList(t *testing.T) {
	list, err := mountList(map[string]S3Mount{
		"/mnt/b":         {Bucket: "my-bucket", Prefix: "p/"},
		"/home/user/out": {Bucket: "my-bucket", Writable: true, AllowOverwrite: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Path order; read-only unless Writable (always explicit on the wire).
	if len(list) != 2 || list[0].Path != "/home/user/out" || list[0].ReadOnly || !list[0].AllowOverwrite ||
		list[1].Path != "/mnt/b" || !list[1].ReadOnly || list[1].Prefix != "p/" {
		t.Fatalf("list %+v", list)
	}
	for name, m := range map[string]map[string]S3Mount{
		"outside":     {"/etc/x": {Bucket: "my-bucket"}},
		"nested":      {"/mnt/a": {Bucket: "my-bucket"}, "/mnt/a/b": {Bucket: "my-bucket"}},
		"dots":        {"/mnt/a": {Bucket: "my.bucket"}},
		"prefix":      {"/mnt/a": {Bucket: "my-bucket", Prefix: "../"}},
		"ro override": {"/mnt/a": {Bucket: "my-bucket", AllowDelete: true}},
		"five": {"/mnt/a": {Bucket: "my-bucket"}, "/mnt/b": {Bucket: "my-bucket"}, "/mnt/c": {Bucket: "my-bucket"},
			"/mnt/d": {Bucket: "my-bucket"}, "/mnt/e": {Bucket: "my-bucket"}},
	} {
		_, err := mountList(m)
		var me *MountError
		if !errors.As(err, &me) || me.Code != MountInvalid || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if strings.Contains(err.Error(), "my.bucket") || strings.Contains(err.Error(), "/etc/x") {
			t.Errorf("%s: the error holds a value: %v", name, err)
		}
	}
}

func TestMountResult(t *testing.T) {
	list, _ := mountList(map[string]S3Mount{"/mnt/a": {Bucket: "bkt"}, "/mnt/b": {Bucket: "bkt"}})
	if err := mountResult(&raydv1.SectionResult{Code: raydv1.SectionCode_SECTION_CODE_APPLIED}, list); err != nil {
		t.Fatal(err)
	}
	err := mountResult(&raydv1.SectionResult{Code: raydv1.SectionCode_SECTION_CODE_FAILED, ErrorClass: "not_allowed", Message: "mounts[1]: not_allowed"}, list)
	var me *MountError
	if !errors.As(err, &me) || me.Code != MountNotAllowed || me.Path != "/mnt/b" {
		t.Fatalf("failed: %v %+v", err, me)
	}
	err = mountResult(&raydv1.SectionResult{Code: raydv1.SectionCode_SECTION_CODE_FAILED, ErrorClass: "something new"}, list)
	if !errors.As(err, &me) || me.Code != MountFailed {
		t.Fatalf("unknown class: %v", err)
	}
	err = mountResult(&raydv1.SectionResult{Code: raydv1.SectionCode_SECTION_CODE_UNSUPPORTED, ErrorClass: "not_built"}, list)
	if !errors.As(err, &me) || me.Code != MountHelperMissing || !errors.Is(err, ErrUnimplemented) {
		t.Fatalf("unsupported: %v", err)
	}
}
