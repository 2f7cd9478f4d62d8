// Package cdk holds Rayito's AWS CDK constructs in Go (security model
// T37): RayitoAgent deploys an agent project to Amazon Bedrock AgentCore
// with the same CloudFormation template as `rayito agent deploy`
// (agentcore.RuntimeTemplate), and RayitoMicrovmImage declares a Lambda
// MicroVMs image with a build role of its own. What the constructs create
// carries the marker rayito.agentcore/1+cdk or the tag
// rayito:managed-by=rayito-cdk, and the CLI refuses to change it.
package cdk
