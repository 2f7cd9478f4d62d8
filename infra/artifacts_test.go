package infra_test

import (
	"fmt"
	"reflect"
	"testing"
)

// The artifact bucket is private, encrypted, owner-enforced and TLS only;
// its references resolve and every parameter is used.
func TestArtifactBucket(t *testing.T) {
	tpl := loadTemplateFile(t, "artifacts.yaml")
	report(t, checkReferences(tpl))
	report(t, checkArtifactBucket(tpl))
}

func checkArtifactBucket(tpl map[string]any) problems {
	var p problems
	res := section(tpl, "Resources")
	if len(res) != 2 {
		p.addf("want exactly the bucket and its policy, got %d resources", len(res))
	}
	b := section(res, "ArtifactBucket")
	if b["Type"] != "AWS::S3::Bucket" || b["DeletionPolicy"] != "Retain" {
		p.addf("ArtifactBucket: type %v, deletion policy %v (want a retained S3 bucket)", b["Type"], b["DeletionPolicy"])
	}
	props := section(b, "Properties")
	pab := section(props, "PublicAccessBlockConfiguration")
	for _, k := range []string{"BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"} {
		if fmt.Sprint(pab[k]) != "true" {
			p.addf("PublicAccessBlockConfiguration.%s = %v, want true", k, pab[k])
		}
	}
	enc, _ := section(props, "BucketEncryption")["ServerSideEncryptionConfiguration"].([]any)
	if len(enc) != 1 {
		p.addf("BucketEncryption: want one rule, got %v", enc)
	} else if rule, _ := enc[0].(map[string]any); section(rule, "ServerSideEncryptionByDefault")["SSEAlgorithm"] == nil {
		p.addf("BucketEncryption: no default algorithm")
	}
	rules, _ := section(props, "OwnershipControls")["Rules"].([]any)
	if len(rules) != 1 || !reflect.DeepEqual(rules[0], map[string]any{"ObjectOwnership": "BucketOwnerEnforced"}) {
		p.addf("OwnershipControls: want BucketOwnerEnforced (no ACLs), got %v", rules)
	}
	if _, ok := props["AccessControl"]; ok {
		p.addf("ArtifactBucket sets an ACL")
	}
	doc := section(section(section(res, "ArtifactBucketPolicy"), "Properties"), "PolicyDocument")
	stmts, _ := doc["Statement"].([]any)
	if len(stmts) != 1 {
		p.addf("the bucket policy must hold exactly the TLS-only deny, got %d statements", len(stmts))
		return p
	}
	s, _ := stmts[0].(map[string]any)
	cond := section(section(s, "Condition"), "Bool")
	if s["Effect"] != "Deny" || s["Principal"] != "*" || s["Action"] != "s3:*" || cond["aws:SecureTransport"] != "false" {
		p.addf("the bucket policy's statement is not a deny of plain HTTP for everyone: %v", s)
	}
	if r, _ := s["Resource"].([]any); len(r) != 2 {
		p.addf("the TLS-only deny must cover the bucket and its objects, got %v", s["Resource"])
	}
	if _, ok := section(tpl, "Outputs")["BucketName"]; !ok {
		p.addf("output BucketName missing")
	}
	return p
}

// The checker notices a public or plain-HTTP bucket.
func TestArtifactBucketCheckerReports(t *testing.T) {
	for name, mutate := range map[string]func(tpl map[string]any){
		"public ACLs allowed": func(tpl map[string]any) {
			section(section(section(section(tpl, "Resources"), "ArtifactBucket"), "Properties"), "PublicAccessBlockConfiguration")["BlockPublicAcls"] = "false"
		},
		"an ACL": func(tpl map[string]any) {
			section(section(section(tpl, "Resources"), "ArtifactBucket"), "Properties")["AccessControl"] = "PublicRead"
		},
		"TLS deny dropped": func(tpl map[string]any) {
			section(section(section(section(tpl, "Resources"), "ArtifactBucketPolicy"), "Properties"), "PolicyDocument")["Statement"] = []any{}
		},
		"an allow instead of the deny": func(tpl map[string]any) {
			stmts := section(section(section(section(tpl, "Resources"), "ArtifactBucketPolicy"), "Properties"), "PolicyDocument")["Statement"].([]any)
			stmts[0].(map[string]any)["Effect"] = "Allow"
		},
	} {
		tpl := loadTemplateFile(t, "artifacts.yaml")
		mutate(tpl)
		if len(checkArtifactBucket(tpl)) == 0 {
			t.Errorf("%s: not reported", name)
		}
	}
}
