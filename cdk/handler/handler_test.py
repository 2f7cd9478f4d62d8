"""Tests of index.py against fake AWS clients: the calls each custom
resource makes, the answers it sends, and that a failure answers a code,
never a message. Run by handler_test.go (python3 -m unittest)."""

import unittest

import index


class NotFound(Exception):
    pass


class FakeECR:
    class exceptions:
        ImageNotFoundException = NotFound

    def __init__(self, digests):
        self.digests = list(digests)
        self.calls = []

    def describe_images(self, **kw):
        self.calls.append(("describe_images", kw))
        d = self.digests.pop(0)
        if d is None:
            raise NotFound()
        return {"imageDetails": [{"imageDigest": d}]}


class FakeCodeBuild:
    def __init__(self, statuses):
        self.statuses = list(statuses)
        self.calls = []

    def start_build(self, **kw):
        self.calls.append(("start_build", kw))
        return {"build": {"id": "b-1"}}

    def batch_get_builds(self, **kw):
        self.calls.append(("batch_get_builds", kw))
        return {"builds": [{"buildStatus": self.statuses.pop(0)}]}


class FakeControl:
    def __init__(self, runtime):
        self.runtime = runtime
        self.calls = []

    def get_agent_runtime(self, **kw):
        self.calls.append(("get_agent_runtime", kw))
        return self.runtime

    def update_agent_runtime(self, **kw):
        self.calls.append(("update_agent_runtime", kw))
        return {}


class Context:
    def __init__(self, ms):
        self.ms = ms

    def get_remaining_time_in_millis(self):
        return self.ms


def run(event, fakes, ms=900_000):
    sent = []
    index.handler(event, Context(ms), clients=lambda name: fakes[name], send=lambda *a: sent.append(a))
    return sent


BUILD = {
    "RequestType": "Create",
    "RequestId": "req-1",
    "ResourceType": index.IMAGE_BUILD,
    "ResponseURL": "https://example.invalid/secret-presigned",
    "ResourceProperties": {
        "ProjectName": "rayito-agentcore-demo",
        "SourceLocation": "bucket/key.zip",
        "RepositoryName": "rayito-agent-demo",
        "ImageTag": "abc",
    },
}


class ImageBuild(unittest.TestCase):
    def setUp(self):
        index.POLL_SECONDS = 0

    def test_builds_and_answers_the_digest(self):
        ecr = FakeECR([None, "sha256:1"])
        cb = FakeCodeBuild(["IN_PROGRESS", "SUCCEEDED"])
        sent = run(BUILD, {"ecr": ecr, "codebuild": cb})
        self.assertEqual(sent[0][1], "SUCCESS")
        self.assertEqual(sent[0][2], "rayito-agent-demo:abc")
        self.assertEqual(sent[0][3], {"ImageDigest": "sha256:1", "Built": "true"})
        start = cb.calls[0][1]
        self.assertEqual(start["projectName"], "rayito-agentcore-demo")
        self.assertEqual(start["sourceLocationOverride"], "bucket/key.zip")
        self.assertEqual(start["environmentVariablesOverride"], [{"name": "IMAGE_TAG", "value": "abc", "type": "PLAINTEXT"}])

    def test_an_image_of_the_tag_is_not_rebuilt(self):
        ecr = FakeECR(["sha256:2"])
        cb = FakeCodeBuild([])
        sent = run(BUILD, {"ecr": ecr, "codebuild": cb})
        self.assertEqual(sent[0][3], {"ImageDigest": "sha256:2", "Built": "false"})
        self.assertEqual(cb.calls, [])

    def test_a_failed_build_answers_a_code(self):
        sent = run(BUILD, {"ecr": FakeECR([None]), "codebuild": FakeCodeBuild(["FAILED"])})
        self.assertEqual((sent[0][1], sent[0][4]), ("FAILED", "image_build_failed FAILED"))

    def test_a_build_that_outlasts_the_function(self):
        sent = run(BUILD, {"ecr": FakeECR([None]), "codebuild": FakeCodeBuild([])}, ms=10_000)
        self.assertEqual(sent[0][1], "FAILED")
        self.assertTrue(sent[0][4].startswith("image_build_timeout"))

    def test_an_aws_error_answers_its_code_not_its_message(self):
        class Boom(Exception):
            response = {"Error": {"Code": "AccessDeniedException", "Message": "arn:aws:secret value"}}

        class Bad(FakeECR):
            def describe_images(self, **kw):
                raise Boom("arn:aws:secret value")

        sent = run(BUILD, {"ecr": Bad([]), "codebuild": FakeCodeBuild([])})
        self.assertEqual((sent[0][1], sent[0][4]), ("FAILED", "aws_error AccessDeniedException"))

    def test_missing_property(self):
        ev = dict(BUILD, ResourceProperties={"ProjectName": "p"})
        sent = run(ev, {})
        self.assertEqual((sent[0][1], sent[0][4]), ("FAILED", "property_missing SourceLocation"))

    def test_delete_calls_nothing(self):
        ev = dict(BUILD, RequestType="Delete", PhysicalResourceId="rayito-agent-demo:abc")
        sent = run(ev, {})
        self.assertEqual(sent[0][1:4], ("SUCCESS", "rayito-agent-demo:abc", {}))


MMDS = {
    "RequestType": "Update",
    "RequestId": "req-2",
    "ResourceType": index.RUNTIME_MMDS,
    "ResponseURL": "https://example.invalid/x",
    "PhysicalResourceId": "rt-1/1",
    "ResourceProperties": {"RuntimeId": "rt-1", "RuntimeVersion": "2"},
}


class RuntimeMmds(unittest.TestCase):
    def test_on_already(self):
        c = FakeControl({"metadataConfiguration": {"requireMMDSV2": True}})
        sent = run(MMDS, {"bedrock-agentcore-control": c})
        self.assertEqual(sent[0][1:4], ("SUCCESS", "rt-1/2", {"RequireMMDSV2": "true", "Updated": "false"}))
        self.assertEqual(c.calls, [("get_agent_runtime", {"agentRuntimeId": "rt-1", "agentRuntimeVersion": "2"})])

    def test_turned_on_keeping_the_rest(self):
        rt = {
            "agentRuntimeArtifact": {"containerConfiguration": {"containerUri": "r@sha256:1"}},
            "roleArn": "arn:aws:iam::1:role/r",
            "networkConfiguration": {"networkMode": "PUBLIC"},
            "description": "rayito.agentcore/1+cdk",
            "environmentVariables": {"RAYITO_SECRET_ENV": "[]"},
            "status": "READY",
            "agentRuntimeArn": "arn",
        }
        c = FakeControl(rt)
        sent = run(MMDS, {"bedrock-agentcore-control": c})
        self.assertEqual(sent[0][3], {"RequireMMDSV2": "true", "Updated": "true"})
        update = c.calls[1]
        self.assertEqual(update[0], "update_agent_runtime")
        self.assertEqual(
            update[1],
            {
                "agentRuntimeId": "rt-1",
                "agentRuntimeArtifact": rt["agentRuntimeArtifact"],
                "roleArn": rt["roleArn"],
                "networkConfiguration": rt["networkConfiguration"],
                "description": rt["description"],
                "environmentVariables": rt["environmentVariables"],
                "metadataConfiguration": {"requireMMDSV2": True},
            },
        )

    def test_unknown_type(self):
        sent = run(dict(MMDS, ResourceType="Custom::Other"), {})
        self.assertEqual((sent[0][1], sent[0][4]), ("FAILED", "unknown_resource_type"))


if __name__ == "__main__":
    unittest.main()
