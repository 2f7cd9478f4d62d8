package infra_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/rayito-dev/rayito/agenthost/agentcore"
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
	p = append(p, checkArtifactLifecycle(props)...)
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

// checkArtifactLifecycle: the AgentCore build contexts (agentcore.ArtifactPrefix,
// agentcore-runtime.yaml's ArtifactPrefix default) expire after 7 days and
// their noncurrent versions after 1; no other rule expires a current
// object (published image artifacts stay), and no rule is disabled.
func checkArtifactLifecycle(props map[string]any) problems {
	var p problems
	rules, _ := section(props, "LifecycleConfiguration")["Rules"].([]any)
	found := 0
	for _, raw := range rules {
		r, _ := raw.(map[string]any)
		if str(r["Status"]) != "Enabled" {
			p.addf("lifecycle rule %v: status %v, want Enabled", r["Id"], r["Status"])
		}
		if _, ok := r["Filter"]; ok {
			p.addf("lifecycle rule %v: a Filter (CloudFormation's rule takes Prefix)", r["Id"])
		}
		prefix, expires := str(r["Prefix"]), r["ExpirationInDays"] != nil || r["ExpirationDate"] != nil
		if prefix != agentcore.ArtifactPrefix {
			if expires {
				p.addf("lifecycle rule %v expires current objects under %q: only the AgentCore build contexts (%s) expire", r["Id"], prefix, agentcore.ArtifactPrefix)
			}
			continue
		}
		found++
		for _, k := range []string{"TagFilters", "ObjectSizeGreaterThan", "ObjectSizeLessThan", "ExpiredObjectDeleteMarker", "Transitions", "NoncurrentVersionTransitions"} {
			if _, ok := r[k]; ok {
				p.addf("lifecycle rule %v: unexpected %s (the contexts expire whatever their tags or size)", r["Id"], k)
			}
		}
		if got := str(r["ExpirationInDays"]); got != "7" {
			p.addf("lifecycle rule %v: %s expires after %s days, want 7", r["Id"], prefix, got)
		}
		nv := section(r, "NoncurrentVersionExpiration")
		if got := str(nv["NoncurrentDays"]); got != "1" || len(nv) != 1 {
			p.addf("lifecycle rule %v: %s's noncurrent versions expire after %s days (%v), want 1", r["Id"], prefix, got, nv)
		}
	}
	if found != 1 {
		p.addf("%d lifecycle rules for %s, want the one that expires the AgentCore build contexts", found, agentcore.ArtifactPrefix)
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
		"the AgentCore contexts kept": func(tpl map[string]any) {
			rules := artifactRules(tpl)
			section(section(section(section(tpl, "Resources"), "ArtifactBucket"), "Properties"), "LifecycleConfiguration")["Rules"] = rules[:len(rules)-1]
		},
		"the AgentCore contexts kept 30 days": func(tpl map[string]any) {
			artifactRule(tpl, "expire-agentcore-build-contexts")["ExpirationInDays"] = "30"
		},
		"their old versions kept 30 days": func(tpl map[string]any) {
			section(artifactRule(tpl, "expire-agentcore-build-contexts"), "NoncurrentVersionExpiration")["NoncurrentDays"] = "30"
		},
		"the AgentCore rule disabled": func(tpl map[string]any) {
			artifactRule(tpl, "expire-agentcore-build-contexts")["Status"] = "Disabled"
		},
		"the expiry widened to rayito/": func(tpl map[string]any) {
			artifactRule(tpl, "expire-agentcore-build-contexts")["Prefix"] = "rayito/"
		},
		"the published images expired": func(tpl map[string]any) {
			artifactRule(tpl, "expire-old-versions")["ExpirationInDays"] = "30"
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

// artifactRules is the bucket's lifecycle rules.
func artifactRules(tpl map[string]any) []any {
	rules, _ := section(section(section(section(tpl, "Resources"), "ArtifactBucket"), "Properties"), "LifecycleConfiguration")["Rules"].([]any)
	return rules
}

// artifactRule is the lifecycle rule id (an empty map if there is none).
func artifactRule(tpl map[string]any, id string) map[string]any {
	for _, raw := range artifactRules(tpl) {
		if r, _ := raw.(map[string]any); r["Id"] == id {
			return r
		}
	}
	return map[string]any{}
}
