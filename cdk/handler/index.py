"""Rayito's CDK custom resources (security model T37), on Python 3.12.

Custom::RayitoImageBuild builds the agent's image: it starts the agent's
CodeBuild project on the code asset (an S3 object of the CDK bootstrap
bucket), waits for the build and answers the image's digest, or answers
the digest of an image already pushed with the same tag (tags are
immutable: the tag is the asset's hash).

Custom::RayitoRuntimeMmds runs on every new version of the agent's
AgentCore runtime: it reads the version and, if it ever came without
MMDSv2 required, turns it on with UpdateAgentRuntime (keeping everything
else as it is).

The function's role can do nothing else (StartBuild and BatchGetBuilds on
the agent's project, DescribeImages on its repository, GetAgentRuntime and
UpdateAgentRuntime on its runtime, PassRole on the runtime role). Nothing
of the event is logged: its ResponseURL is a presigned URL. A failure
answers only an error code, never a message that could carry a name or a
value.
"""

import json
import time
import urllib.request

IMAGE_BUILD = "Custom::RayitoImageBuild"
RUNTIME_MMDS = "Custom::RayitoRuntimeMmds"

# Build states that end a build without an image.
BUILD_FAILED = ("FAILED", "FAULT", "STOPPED", "TIMED_OUT")

# The fields of GetAgentRuntime that UpdateAgentRuntime takes back as they
# are (UpdateAgentRuntime replaces the whole configuration).
RUNTIME_FIELDS = (
    "agentRuntimeArtifact",
    "roleArn",
    "networkConfiguration",
    "description",
    "authorizerConfiguration",
    "requestHeaderConfiguration",
    "protocolConfiguration",
    "lifecycleConfiguration",
    "environmentVariables",
    "filesystemConfigurations",
    "hooksConfiguration",
    "allowedPorts",
    "resourceConfigurations",
    "capacityProviderConfiguration",
    "platformVersion",
)

# Seconds kept for the answer when a build outlasts the function.
MARGIN_MS = 45_000
POLL_SECONDS = 15


class Failure(Exception):
    """A refusal with a closed code, answered as the Reason."""


def handler(event, context, clients=None, send=None):
    """Entry point of both custom resources."""
    send = send or respond
    if clients is None:
        import boto3  # the Lambda runtime's; the tests pass fakes

        clients = boto3.client
    physical = event.get("PhysicalResourceId") or "rayito-pending"
    try:
        kind = event.get("ResourceType")
        if event.get("RequestType") == "Delete":
            # The image goes with its repository (EmptyOnDelete) and the
            # runtime with the stack: nothing to undo here.
            send(event, "SUCCESS", physical, {}, "")
            return
        props = event.get("ResourceProperties") or {}
        if kind == IMAGE_BUILD:
            physical, data = image_build(props, clients, context, event.get("RequestId", ""))
        elif kind == RUNTIME_MMDS:
            physical, data = runtime_mmds(props, clients)
        else:
            raise Failure("unknown_resource_type")
        send(event, "SUCCESS", physical, data, "")
    except Failure as e:
        send(event, "FAILED", physical, {}, str(e))
    except Exception as e:  # noqa: BLE001: the answer must always be sent
        resp = getattr(e, "response", None)
        code = resp.get("Error", {}).get("Code") if isinstance(resp, dict) else None
        send(event, "FAILED", physical, {}, "aws_error " + (code or type(e).__name__))


def need(props, key):
    value = props.get(key)
    if not isinstance(value, str) or not value:
        raise Failure("property_missing " + key)
    return value


def image_digest(ecr, repository, tag):
    try:
        res = ecr.describe_images(repositoryName=repository, imageIds=[{"imageTag": tag}])
    except ecr.exceptions.ImageNotFoundException:
        return None
    for image in res.get("imageDetails", []):
        if image.get("imageDigest"):
            return image["imageDigest"]
    return None


def image_build(props, clients, context, request_id):
    project = need(props, "ProjectName")
    location = need(props, "SourceLocation")
    repository = need(props, "RepositoryName")
    tag = need(props, "ImageTag")
    ecr = clients("ecr")
    physical = repository + ":" + tag
    digest = image_digest(ecr, repository, tag)
    if digest:
        return physical, {"ImageDigest": digest, "Built": "false"}
    codebuild = clients("codebuild")
    args = {
        "projectName": project,
        "sourceTypeOverride": "S3",
        "sourceLocationOverride": location,
        "environmentVariablesOverride": [{"name": "IMAGE_TAG", "value": tag, "type": "PLAINTEXT"}],
    }
    if request_id:
        args["idempotencyToken"] = request_id[:64]
    build_id = codebuild.start_build(**args)["build"]["id"]
    while True:
        if context is not None and context.get_remaining_time_in_millis() < MARGIN_MS + POLL_SECONDS * 1000:
            raise Failure("image_build_timeout the build outlasted the function (15 minutes)")
        time.sleep(POLL_SECONDS)
        builds = codebuild.batch_get_builds(ids=[build_id]).get("builds", [])
        status = builds[0].get("buildStatus") if builds else None
        if status == "SUCCEEDED":
            break
        if status in BUILD_FAILED:
            raise Failure("image_build_failed " + status)
    digest = image_digest(ecr, repository, tag)
    if not digest:
        raise Failure("image_missing the build succeeded but pushed no image with the tag")
    return physical, {"ImageDigest": digest, "Built": "true"}


def runtime_mmds(props, clients):
    runtime_id = need(props, "RuntimeId")
    version = need(props, "RuntimeVersion")
    control = clients("bedrock-agentcore-control")
    runtime = control.get_agent_runtime(agentRuntimeId=runtime_id, agentRuntimeVersion=version)
    physical = runtime_id + "/" + version
    if (runtime.get("metadataConfiguration") or {}).get("requireMMDSV2") is True:
        return physical, {"RequireMMDSV2": "true", "Updated": "false"}
    args = {k: runtime[k] for k in RUNTIME_FIELDS if runtime.get(k) is not None}
    args["agentRuntimeId"] = runtime_id
    args["metadataConfiguration"] = {"requireMMDSV2": True}
    control.update_agent_runtime(**args)
    return physical, {"RequireMMDSV2": "true", "Updated": "true"}


def respond(event, status, physical, data, reason):
    body = json.dumps(
        {
            "Status": status,
            "Reason": reason or status,
            "PhysicalResourceId": physical,
            "StackId": event.get("StackId"),
            "RequestId": event.get("RequestId"),
            "LogicalResourceId": event.get("LogicalResourceId"),
            "NoEcho": False,
            "Data": data,
        }
    ).encode()
    req = urllib.request.Request(
        event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": "", "Content-Length": str(len(body))}
    )
    for attempt in range(5):
        try:
            with urllib.request.urlopen(req, timeout=30):
                return
        except OSError:
            time.sleep(2**attempt)
    # Nothing is logged but the fact: the URL is a presigned secret.
    print(json.dumps({"msg": "custom_resource_response_failed"}))
