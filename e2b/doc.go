// Package e2b serves E2B's API in front of Rayito, so that the official
// E2B SDKs (e2b, @e2b/code-interpreter) work against Rayito unchanged,
// configured only by E2B_API_URL, E2B_SANDBOX_URL (or E2B_DOMAIN) and
// E2B_API_KEY: E2B's control-plane REST API, mapped onto Rayito's
// sandboxes through the rayito SDK (so onto the local platform or AWS
// Lambda MicroVMs alike), and the sandbox router that forwards E2B's
// data-plane requests (E2b-Sandbox-Id, E2b-Sandbox-Port) to the sandbox's
// rayd, which speaks envd's protocol itself.
package e2b
