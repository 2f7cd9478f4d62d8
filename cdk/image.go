package cdk

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3assets"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
)

// The Lambda MicroVMs image settings the CLI's `rayito image publish`
// sends too: the managed base image, rayd's hooks port and timeouts.
const (
	microvmBaseImage = "al2023-1"
	hooksPort        = 9000
	// LogGroupPrefix is where an image's build and runtime logs go:
	// /rayito/<name>.
	LogGroupPrefix = "/rayito/"
)

// RayitoMicrovmImageProps are a RayitoMicrovmImage's props.
type RayitoMicrovmImageProps struct {
	// Name is the image's name ([A-Za-z0-9_-], 1 to 64): its log group is
	// /rayito/<Name> (required).
	Name string
	// Artifact is the image's code artifact: a zip with the Dockerfile at
	// its root, as `rayito image build` writes (required, checked).
	Artifact string
	// MemoryMiB is the image's minimum memory: 512, 1024, 2048 (default),
	// 4096 or 8192.
	MemoryMiB int
	// BaseImageVersion is the managed base image al2023-1's version
	// (default "1").
	BaseImageVersion string
	// OSCapabilitiesAll asks for additionalOsCapabilities [ALL].
	OSCapabilitiesAll bool
	// Description is the image's description (default: one naming the
	// construct).
	Description string
}

// RayitoMicrovmImage is a Lambda MicroVMs image declared by a CDK stack:
// its code artifact (an S3 asset), a build role of its own and the image
// (AWS::Lambda::MicrovmImage), tagged rayito:managed-by=rayito-cdk so
// that `rayito image publish` refuses to change it.
type RayitoMicrovmImage struct {
	constructs.Construct
	// Artifact is the zip asset.
	Artifact awss3assets.Asset
	// BuildRole is the image's build role: only Lambda in the account may
	// assume it; it reads only the asset object and writes only the
	// image's log group.
	BuildRole awsiam.CfnRole
	// Image is the image.
	Image awslambda.CfnMicrovmImage
}

var imageName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NewRayitoMicrovmImage declares props.Name's image in scope. Bad props
// are a *PropsError (errors.Is ErrInvalidProps); nothing is added to
// scope then.
func NewRayitoMicrovmImage(scope constructs.Construct, id *string, props *RayitoMicrovmImageProps) (*RayitoMicrovmImage, error) {
	if err := checkScope(scope, id); err != nil {
		return nil, err
	}
	if props == nil || !imageName.MatchString(props.Name) {
		return nil, invalid(CodePropsInvalid, "Name must be 1 to 64 of [A-Za-z0-9_-]")
	}
	memory := props.MemoryMiB
	switch memory {
	case 0:
		memory = 2048
	case 512, 1024, 2048, 4096, 8192:
	default:
		return nil, invalid(CodePropsInvalid, "MemoryMiB must be 512, 1024, 2048, 4096 or 8192")
	}
	version := props.BaseImageVersion
	if version == "" {
		version = "1"
	}
	if !regexp.MustCompile(`^[0-9]{1,9}(\.[0-9]{1,9})?$`).MatchString(version) {
		return nil, invalid(CodePropsInvalid, "BaseImageVersion must be a version number (1)")
	}
	desc := props.Description
	if desc == "" {
		desc = "Rayito image " + props.Name + " (CDK: " + agentcore.ManagedByTag + "=" + agentcore.ManagedByCDK + ")"
	}
	if len(desc) > 256 || strings.ContainsAny(desc, "\x00\n\r") {
		return nil, invalid(CodePropsInvalid, "Description must be one line of at most 256 bytes")
	}
	if props.Artifact == "" || !strings.EqualFold(filepath.Ext(props.Artifact), ".zip") {
		return nil, invalid(CodeArtifactInvalid, "Artifact must be a .zip file")
	}
	if err := checkArtifactFile(props.Artifact); err != nil {
		return nil, err
	}

	// Everything is checked: from here on the tree grows.
	node := constructs.NewConstruct(scope, id)
	m := &RayitoMicrovmImage{Construct: node}
	m.Artifact = awss3assets.NewAsset(node, jsii.String("Artifact"), &awss3assets.AssetProps{Path: jsii.String(props.Artifact)})
	logGroup := LogGroupPrefix + props.Name
	logArn := "arn:${AWS::Partition}:logs:${AWS::Region}:${AWS::AccountId}:log-group:" + logGroup
	m.BuildRole = awsiam.NewCfnRole(node, jsii.String("BuildRole"), &awsiam.CfnRoleProps{
		Description: jsii.String("Rayito MicroVM image build role of " + props.Name + " (T37): reads its artifact, writes its log group."),
		AssumeRolePolicyDocument: map[string]interface{}{"Version": "2012-10-17", "Statement": []interface{}{map[string]interface{}{
			"Sid": "LambdaMicrovmsBuildInThisAccount", "Effect": "Allow",
			"Principal": map[string]interface{}{"Service": "lambda.amazonaws.com"}, "Action": "sts:AssumeRole",
			"Condition": map[string]interface{}{"StringEquals": map[string]interface{}{"aws:SourceAccount": awscdk.Aws_ACCOUNT_ID()}},
		}}},
		Policies: []interface{}{&awsiam.CfnRole_PolicyProperty{
			PolicyName: jsii.String("rayito-cdk-image-build"),
			PolicyDocument: document(
				statement("ReadImageArtifact", []string{"s3:GetObject"},
					awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("arn:"), awscdk.Aws_PARTITION(), jsii.String(":s3:::"), m.Artifact.S3BucketName(), jsii.String("/"), m.Artifact.S3ObjectKey()})),
				statement("CreateBuildLogGroup", []string{"logs:CreateLogGroup"}, awscdk.Fn_Sub(jsii.String(logArn), nil)),
				statement("WriteBuildLogs", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, awscdk.Fn_Sub(jsii.String(logArn+":log-stream:*"), nil)),
			),
		}},
		Tags: &[]*awscdk.CfnTag{{Key: jsii.String(agentcore.ManagedByTag), Value: jsii.String(agentcore.ManagedByCDK)}},
	})
	var caps []*string
	if props.OSCapabilitiesAll {
		caps = append(caps, jsii.String("ALL"))
	}
	enabled := jsii.String("ENABLED")
	m.Image = awslambda.NewCfnMicrovmImage(node, jsii.String("Image"), &awslambda.CfnMicrovmImageProps{
		Name:                     jsii.String(props.Name),
		Description:              jsii.String(desc),
		BaseImageArn:             awscdk.Fn_Sub(jsii.String("arn:${AWS::Partition}:lambda:${AWS::Region}:aws:microvm-image:"+microvmBaseImage), nil),
		BaseImageVersion:         jsii.String(version),
		BuildRoleArn:             m.BuildRole.AttrArn(),
		CodeArtifact:             &awslambda.CfnMicrovmImage_CodeArtifactProperty{Uri: awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("s3://"), m.Artifact.S3BucketName(), jsii.String("/"), m.Artifact.S3ObjectKey()})},
		CpuConfigurations:        []interface{}{&awslambda.CfnMicrovmImage_CpuConfigurationProperty{Architecture: jsii.String("ARM_64")}},
		AdditionalOsCapabilities: &caps,
		EgressNetworkConnectors:  &[]*string{},
		EnvironmentVariables:     []interface{}{},
		Resources:                []interface{}{&awslambda.CfnMicrovmImage_ResourcesProperty{MinimumMemoryInMiB: jsii.Number(float64(memory))}},
		Hooks: &awslambda.CfnMicrovmImage_HooksProperty{
			Port: jsii.Number(hooksPort),
			MicrovmHooks: &awslambda.CfnMicrovmImage_MicrovmHooksProperty{
				Run: enabled, RunTimeoutInSeconds: jsii.Number(30),
				Resume: enabled, ResumeTimeoutInSeconds: jsii.Number(30),
				Suspend: enabled, SuspendTimeoutInSeconds: jsii.Number(30),
				Terminate: enabled, TerminateTimeoutInSeconds: jsii.Number(10),
			},
			MicrovmImageHooks: &awslambda.CfnMicrovmImage_MicrovmImageHooksProperty{
				Ready: enabled, ReadyTimeoutInSeconds: jsii.Number(600),
				Validate: enabled, ValidateTimeoutInSeconds: jsii.Number(600),
			},
		},
		Logging: &awslambda.CfnMicrovmImage_LoggingProperty{CloudWatch: &awslambda.CfnMicrovmImage_CloudWatchLoggingProperty{LogGroup: jsii.String(logGroup)}},
		Tags:    &[]*awscdk.CfnTag{{Key: jsii.String(agentcore.ManagedByTag), Value: jsii.String(agentcore.ManagedByCDK)}},
	})
	return m, nil
}

// checkArtifactFile checks that the file at path is a regular file and a
// valid code artifact (CheckArtifact).
func checkArtifactFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return &PropsError{Code: CodeArtifactInvalid, Detail: "Artifact cannot be read", Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return invalid(CodeArtifactInvalid, "Artifact is not a regular file")
	}
	return CheckArtifact(f, st.Size())
}
