module github.com/rayito-dev/rayito/infra

go 1.26.0

require (
	github.com/rayito-dev/rayito/agenthost v0.1.0
	go.yaml.in/yaml/v3 v3.0.5
)

require github.com/pelletier/go-toml/v2 v2.4.3 // indirect
