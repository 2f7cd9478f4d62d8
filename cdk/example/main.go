// Command example is a CDK app that declares a Rayito agent on Amazon
// Bedrock AgentCore (RayitoAgent, the sample project in ./agent) and a
// Lambda MicroVMs image (RayitoMicrovmImage, when the constant imageZip names
// a zip). Edit the constants, then `cdk synth` or `cdk deploy` from this
// directory (cdk.json runs `go run .`). See docs/cdk.md.
package main

import (
	"fmt"
	"os"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"

	"github.com/rayito-dev/rayito/cdk"
)

// Edit these: the account and region the stack deploys to, Rayito's
// artifact bucket there (`rayito setup` creates it), and optionally an
// image zip from `rayito image build`.
const (
	account        = "123456789012"
	region         = "us-east-1"
	artifactBucket = "rayito-artifacts-123456789012-us-east-1"
	imageZip       = ""
)

// synth declares the stack into outdir ("" = CDK's default, cdk.out)
// with the agent host at host ("" = built with the go command).
func synth(outdir, host string) error {
	var props *awscdk.AppProps
	if outdir != "" {
		props = &awscdk.AppProps{Outdir: jsii.String(outdir)}
	}
	app := awscdk.NewApp(props)
	stack := awscdk.NewStack(app, jsii.String("RayitoHelloAgent"), &awscdk.StackProps{
		Env: &awscdk.Environment{Account: jsii.String(account), Region: jsii.String(region)},
	})
	if _, err := cdk.NewRayitoAgent(stack, jsii.String("Hello"), &cdk.RayitoAgentProps{
		ProjectDir:     "agent",
		HostBinary:     host,
		ArtifactBucket: artifactBucket,
	}); err != nil {
		return err
	}
	if imageZip != "" {
		if _, err := cdk.NewRayitoMicrovmImage(stack, jsii.String("Sandbox"), &cdk.RayitoMicrovmImageProps{Name: "hello-sandbox", Artifact: imageZip}); err != nil {
			return err
		}
	}
	app.Synth(nil)
	return nil
}

func main() {
	if err := synth("", ""); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
