module github.com/rayito-dev/rayito/infra

go 1.26.0

require (
	github.com/rayito-dev/rayito/agenthost v0.1.0
	go.yaml.in/yaml/v3 v3.0.5
)

require (
	github.com/aws/aws-sdk-go-v2 v1.48.0 // indirect
	github.com/aws/aws-sdk-go-v2/internal/configsources v1.5.12 // indirect
	github.com/aws/aws-sdk-go-v2/internal/endpoints/v2 v2.8.12 // indirect
	github.com/aws/aws-sdk-go-v2/service/bedrockagentcorecontrol v1.81.0 // indirect
	github.com/aws/aws-sdk-go-v2/service/ecr v1.69.0 // indirect
	github.com/aws/smithy-go v1.28.9 // indirect
	github.com/pelletier/go-toml/v2 v2.4.3 // indirect
)
