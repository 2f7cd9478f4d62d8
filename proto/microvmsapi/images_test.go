package microvmsapi

import (
	"encoding/json"
	"testing"
	"time"
)

func TestImagePaths(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		MicrovmImagePath("demo"):                               "/2025-09-09/microvm-images/demo",
		MicrovmImagePath("arn:aws:lambda:r:1:microvm-image:x"): "/2025-09-09/microvm-images/arn:aws:lambda:r:1:microvm-image:x",
		MicrovmImageVersionsPath("a/b"):                        "/2025-09-09/microvm-images/a%2Fb/versions",
		MicrovmImageVersionPath("demo", "1.0"):                 "/2025-09-09/microvm-images/demo/versions/1.0",
		MicrovmImageBuildsPath("demo", "2"):                    "/2025-09-09/microvm-images/demo/versions/2/builds",
		MicrovmImageBuildPath("demo", "2", "b 1"):              "/2025-09-09/microvm-images/demo/versions/2/builds/b%201",
		ManagedMicrovmImageVersionsPath("al2023-1"):            "/2025-09-09/managed-microvm-images/al2023-1/versions",
		ShellAuthTokenPath("microvm-1"):                        "/2025-09-09/microvms/microvm-1/shell-auth-token",
		TagsPath("arn:aws:lambda:r:1:microvm-image:x"):         "/2017-03-31/tags/arn:aws:lambda:r:1:microvm-image:x",
		PathManagedMicrovmImages:                               "/2025-09-09/managed-microvm-images",
		PathMicrovmImages:                                      "/2025-09-09/microvm-images",
	}
	for got, want := range cases {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestImageStates(t *testing.T) {
	t.Parallel()
	for _, s := range []ImageState{ImageCreating, ImageCreated, ImageCreateFailed, ImageUpdating, ImageUpdated, ImageUpdateFailed, ImageDeleting, ImageDeleteFailed, ImageDeleted} {
		if !s.Valid() {
			t.Errorf("%s", s)
		}
	}
	for _, s := range []VersionState{VersionPending, VersionInProgress, VersionSuccessful, VersionFailed, VersionDeleting, VersionDeleted, VersionDeleteFailed} {
		if !s.Valid() {
			t.Errorf("%s", s)
		}
	}
	for _, s := range []BuildState{BuildPending, BuildInProgress, BuildSuccessful, BuildFailed} {
		if !s.Valid() {
			t.Errorf("%s", s)
		}
	}
	if ImageState("X").Valid() || VersionState("X").Valid() || BuildState("X").Valid() || VersionStatus("X").Valid() ||
		!VersionActive.Valid() || !VersionInactive.Valid() {
		t.Error("Valid")
	}
	if !ImageCreated.Launchable() || !ImageUpdated.Launchable() || ImageUpdating.Launchable() {
		t.Error("Launchable")
	}
}

func TestTimestamp(t *testing.T) {
	t.Parallel()
	var v struct {
		A *Timestamp `json:"a"`
		B *Timestamp `json:"b"`
		C *Timestamp `json:"c"`
	}
	if err := json.Unmarshal([]byte(`{"a":1767323045,"b":1767323045.25,"c":"2026-01-02T03:04:05Z"}`), &v); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC); !v.A.Equal(want) || !v.C.Equal(want) || !v.B.Equal(want.Add(250*time.Millisecond)) {
		t.Errorf("%v %v %v", v.A, v.B, v.C)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"a":1767323045,"b":1767323045.25,"c":1767323045}` {
		t.Errorf("marshal %s", b)
	}
	var bad Timestamp
	if err := json.Unmarshal([]byte(`true`), &bad); err == nil {
		t.Error("accepted true")
	}
}

func TestCreateImageJSON(t *testing.T) {
	t.Parallel()
	in := CreateMicrovmImageInput{
		Name: "demo",
		ImageBuildConfig: ImageBuildConfig{
			BaseImageArn: "arn:b", BuildRoleArn: "arn:r", CodeArtifact: &CodeArtifact{URI: "s3://b/k.zip"},
			Hooks: &Hooks{Port: HooksPort, MicrovmImageHooks: &MicrovmImageHooks{Ready: HookEnabled, ReadyTimeoutInSeconds: 600}},
		},
		ClientToken: "t",
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"demo","baseImageArn":"arn:b","buildRoleArn":"arn:r","codeArtifact":{"uri":"s3://b/k.zip"},` +
		`"hooks":{"port":9000,"microvmImageHooks":{"ready":"ENABLED","readyTimeoutInSeconds":600}},"clientToken":"t"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
