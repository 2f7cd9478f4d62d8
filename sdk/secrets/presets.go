package secrets

import "strings"

// Presets for model providers. Each returns a Gateway that opens only
// the endpoints a model client needs, with the provider's key header and a
// variable its official clients read for their base URL. Where the model
// travels in the request body (OpenAI-style APIs) the gateway cannot limit
// which models are used: cap the spend at the provider.

// AnthropicGateway is Anthropic's Messages API (api.anthropic.com) with
// key in x-api-key: POST /v1/messages and /v1/messages/count_tokens.
// Sandbox code finds the URL in ANTHROPIC_BASE_URL.
func AnthropicGateway(key Ref) Gateway {
	return Gateway{
		Name: "anthropic", Upstream: "https://api.anthropic.com",
		Headers: map[string]HeaderValue{"x-api-key": Plain(key)},
		Allow:   []GatewayRule{{"POST", "/v1/messages"}, {"POST", "/v1/messages/count_tokens"}},
		Env:     "ANTHROPIC_BASE_URL",
	}
}

// OpenAICompatibleGateway is an OpenAI-style API at upstream whose routes
// live under basePath (e.g. "/v1"), with key as a bearer token: POST
// chat/completions, completions, responses and embeddings, GET models.
// env names the variable that receives the URL with basePath (e.g.
// OPENAI_BASE_URL). The model travels in the body: cap spend at the
// provider.
func OpenAICompatibleGateway(name, upstream, basePath string, key Ref, env string) Gateway {
	base := strings.TrimSuffix(basePath, "/")
	return Gateway{
		Name: name, Upstream: upstream,
		Headers: map[string]HeaderValue{"Authorization": Bearer(key)},
		Allow: []GatewayRule{
			{"POST", base + "/chat/completions"}, {"POST", base + "/completions"}, {"POST", base + "/responses"},
			{"POST", base + "/embeddings"}, {"GET", base + "/models"},
		},
		Env: env, EnvPath: base,
	}
}

// OpenAIGateway is api.openai.com (OPENAI_BASE_URL).
func OpenAIGateway(key Ref) Gateway {
	return OpenAICompatibleGateway("openai", "https://api.openai.com", "/v1", key, "OPENAI_BASE_URL")
}

// OpenRouterGateway is openrouter.ai (OPENAI_BASE_URL).
func OpenRouterGateway(key Ref) Gateway {
	return OpenAICompatibleGateway("openrouter", "https://openrouter.ai", "/api/v1", key, "OPENAI_BASE_URL")
}

// GroqGateway is api.groq.com's OpenAI-compatible API (GROQ_BASE_URL).
func GroqGateway(key Ref) Gateway {
	return OpenAICompatibleGateway("groq", "https://api.groq.com", "/openai/v1", key, "GROQ_BASE_URL")
}

// MistralGateway is api.mistral.ai (MISTRAL_BASE_URL).
func MistralGateway(key Ref) Gateway {
	return OpenAICompatibleGateway("mistral", "https://api.mistral.ai", "/v1", key, "MISTRAL_BASE_URL")
}

// DeepSeekGateway is api.deepseek.com (DEEPSEEK_BASE_URL).
func DeepSeekGateway(key Ref) Gateway {
	return OpenAICompatibleGateway("deepseek", "https://api.deepseek.com", "/v1", key, "DEEPSEEK_BASE_URL")
}

// XAIGateway is api.x.ai (XAI_BASE_URL).
func XAIGateway(key Ref) Gateway {
	return OpenAICompatibleGateway("xai", "https://api.x.ai", "/v1", key, "XAI_BASE_URL")
}

// LiteLLMGateway is a LiteLLM proxy of yours at upstream (https://host)
// with its virtual key (OPENAI_BASE_URL).
func LiteLLMGateway(upstream string, key Ref) Gateway {
	return OpenAICompatibleGateway("litellm", upstream, "/v1", key, "OPENAI_BASE_URL")
}

// AzureOpenAIGateway is an Azure OpenAI resource
// (https://RESOURCE.openai.azure.com) with key in api-key: chat
// completions, completions and embeddings of the given deployments only,
// and the v1 API's chat completions and responses (the model in the body).
// The URL is in AZURE_OPENAI_ENDPOINT.
func AzureOpenAIGateway(resource string, key Ref, deployments ...string) Gateway {
	g := Gateway{
		Name: "azure-openai", Upstream: "https://" + resource + ".openai.azure.com",
		Headers: map[string]HeaderValue{"api-key": Plain(key)},
		Allow:   []GatewayRule{{"POST", "/openai/v1/chat/completions"}, {"POST", "/openai/v1/responses"}},
		Env:     "AZURE_OPENAI_ENDPOINT",
	}
	for _, d := range deployments {
		for _, op := range []string{"chat/completions", "completions", "embeddings"} {
			g.Allow = append(g.Allow, GatewayRule{"POST", "/openai/deployments/" + d + "/" + op})
		}
	}
	return g
}

// BedrockGateway is Amazon Bedrock's runtime in region with a Bedrock API
// key as a bearer token: InvokeModel, InvokeModelWithResponseStream,
// Converse and ConverseStream of the given model ids only (never
// /model/*; at most 8 models). The URL is in
// AWS_ENDPOINT_URL_BEDROCK_RUNTIME, which the AWS SDKs read.
func BedrockGateway(region string, key Ref, models ...string) Gateway {
	g := Gateway{
		Name: "bedrock", Upstream: "https://bedrock-runtime." + region + ".amazonaws.com",
		Headers: map[string]HeaderValue{"Authorization": Bearer(key)},
		Env:     "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
	}
	for _, m := range models {
		for _, op := range []string{"invoke", "invoke-with-response-stream", "converse", "converse-stream"} {
			g.Allow = append(g.Allow, GatewayRule{"POST", "/model/" + m + "/" + op})
		}
	}
	return g
}

// GeminiGateway is the Gemini API (generativelanguage.googleapis.com) with
// key in x-goog-api-key: generateContent, streamGenerateContent and
// countTokens of the given models only. The URL is in
// GOOGLE_GEMINI_BASE_URL.
func GeminiGateway(key Ref, models ...string) Gateway {
	g := Gateway{
		Name: "gemini", Upstream: "https://generativelanguage.googleapis.com",
		Headers: map[string]HeaderValue{"x-goog-api-key": Plain(key)},
		Env:     "GOOGLE_GEMINI_BASE_URL",
	}
	for _, m := range models {
		for _, op := range []string{"generateContent", "streamGenerateContent", "countTokens"} {
			g.Allow = append(g.Allow, GatewayRule{"POST", "/v1beta/models/" + m + ":" + op})
		}
	}
	return g
}
