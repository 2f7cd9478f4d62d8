package cdk_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aws/jsii-runtime-go"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
	"github.com/rayito-dev/rayito/cdk"
)

// TestCodeAsset: the staged code asset is the CLI's build context layout:
// the CLI's Dockerfile for the project's command, the project under app/,
// the host at bin/rayito-agent-host; the custom resource builds it under
// its hash.
func TestCodeAsset(t *testing.T) {
	tag := props(t, synthesized, "ImageBuild")["ImageTag"].(string)
	dir := filepath.Join(testOutdir, "asset."+tag)
	df, err := os.ReadFile(filepath.Join(dir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := agentcore.Dockerfile(testBase, []string{"python3", "agent.py"})
	if err != nil {
		t.Fatal(err)
	}
	if string(df) != want {
		t.Errorf("Dockerfile\n%s\nwant the CLI's\n%s", df, want)
	}
	for _, f := range []string{"app/rayito-agent.toml", "app/agent.py", "bin/rayito-agent-host"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if st, err := os.Stat(filepath.Join(dir, "bin/rayito-agent-host")); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Errorf("the host is not executable: %v", err)
	}
}

// TestBuiltHostIsReproducible: without HostBinary the host is built with
// the go command for linux/arm64, and two synths give the same asset
// (the same image tag: a redeploy of the same project builds nothing).
func TestBuiltHostIsReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the agent host with the go command")
	}
	dir := t.TempDir()
	project, _, _, err := fixture(dir, testProject)
	if err != nil {
		t.Fatal(err)
	}
	var tags []string
	for i := range 2 {
		_, stack := newStack(filepath.Join(dir, "out", string(rune('a'+i))))
		a, err := cdk.NewRayitoAgent(stack, jsii.String("Demo"), &cdk.RayitoAgentProps{ProjectDir: project, ArtifactBucket: testBucket})
		if err != nil {
			t.Fatal(err)
		}
		tags = append(tags, *a.Code.AssetHash())
	}
	if tags[0] != tags[1] {
		t.Errorf("two synths of the same project give assets %s and %s", tags[0], tags[1])
	}
}
