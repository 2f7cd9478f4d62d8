package cdk

// The modules the agent host's command imports beyond what this package
// does: with them in this module's go.sum, TestBuiltHostIsReproducible
// builds the host outside the workspace too (make standalone). A CDK app
// gets the same with `go get
// github.com/rayito-dev/rayito/agenthost/cmd/rayito-agent-host` (docs/cdk.md).
import (
	_ "github.com/aws/aws-sdk-go-v2/config"
	_ "github.com/aws/aws-sdk-go-v2/service/secretsmanager"
)
