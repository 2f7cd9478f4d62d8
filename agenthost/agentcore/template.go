package agentcore

import _ "embed"

// RuntimeTemplate is the CloudFormation template of an agent's AgentCore
// resources: the runtime role with exactly T36's least privilege, the ECR
// repository (immutable tags, scan on push), the CodeBuild role and
// project. `rayito agent deploy --target agentcore` and the CDK construct
// RayitoAgent deploy this same template; infra/agentcore-runtime.yaml is a
// link to it, and infra's tests hold it to exact statement tables.
//
//go:embed agentcore-runtime.yaml
var RuntimeTemplate string
