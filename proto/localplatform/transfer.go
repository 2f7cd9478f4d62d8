package localplatform

import "time"

// Pre-signed transfers on the local platform (the security model's T16,
// as on AWS with a transfer bucket). The platform's store keeps transfer
// objects in DefaultBucket under
// TransferPrefix/<sandbox id>/<up|down>/<id>, and accepts for them only
// SigV4 pre-signed query signatures made with the platform's transfer
// credentials (never the sandboxes' own). It is reached two ways:
//
//   - by a sandbox's rayd, through its services socket, at TransferHost:
//     the exact regional virtual host rayd's URL policy demands (https in
//     the URL; the socket carries plain HTTP, being rayd's alone);
//   - by the platform's owner (the PUT of an upload URL, the GET of a
//     download link), path-style on a loopback port of the platform that
//     serves only its owner, as the control endpoint does.
//
// A client gets the owner's store URL and the credentials from the
// control endpoint's TransferSettingsPath (owner only).
const (
	// TransferPrefix is the first segment of every transfer object's key.
	TransferPrefix = "rayito-transfer"
	// TransferHost is the host of rayd's pre-signed URLs on the local
	// platform: DefaultBucket's virtual host in Region.
	TransferHost = DefaultBucket + ".s3." + Region + ".amazonaws.com"
	// TransferSettingsPath is the control endpoint's route of the
	// transfer settings (GET, JSON TransferSettings).
	TransferSettingsPath = "/_rayito/transfer-settings"
	// TransferCredentialTTL is how long the credentials the route hands
	// out are valid; a URL signed with them expires with them at the
	// latest.
	TransferCredentialTTL = 12 * time.Hour
)

// TransferSettings is what TransferSettingsPath answers: the store as the
// owner reaches it, the bucket, region and key prefix of transfer
// objects, and credentials that may sign URLs for them (and only them)
// until Expiration.
type TransferSettings struct {
	// StoreURL is http://HOST:PORT of the owner's loopback listener
	// (path-style: StoreURL/Bucket/key).
	StoreURL        string    `json:"storeUrl"`
	Bucket          string    `json:"bucket"`
	Region          string    `json:"region"`
	Prefix          string    `json:"prefix"`
	AccessKeyID     string    `json:"accessKeyId"`
	SecretAccessKey string    `json:"secretAccessKey"`
	Expiration      time.Time `json:"expiration"`
}
