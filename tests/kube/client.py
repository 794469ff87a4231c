"""The official Python Kubernetes client against the emulator's Kubernetes API stand-in.

Run by tests/emulator/kube.rs with the pinned client (tests/kube/requirements.txt) and the
kubeconfig the emulator's listClusterUserCredential returned: typed create/read/list/patch/
delete, server-side apply with conflicts and force, the dynamic client's discovery, CRDs, and
the API server's errors as the client reads them (status, reason). Prints one line per step;
any failed expectation raises, so the process exits non-zero.
"""

import sys

from kubernetes import client, config, dynamic
from kubernetes.client.rest import ApiException

APPLY = "application/apply-patch+yaml"


def expect_error(status, reason, call):
    try:
        call()
    except ApiException as err:
        assert err.status == status, (err.status, err.body)
        assert reason in err.body, err.body
        return err
    raise AssertionError("expected HTTP %d %s" % (status, reason))


def main(kubeconfig):
    api_client = config.new_client_from_config(config_file=kubeconfig)
    core = client.CoreV1Api(api_client)

    names = sorted(ns.metadata.name for ns in core.list_namespace().items)
    assert names == ["default", "kube-node-lease", "kube-public", "kube-system"], names
    print("namespaces", names)

    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="team")))
    expect_error(409, "AlreadyExists", lambda: core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name="team"))))
    cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="settings", labels={"app": "train"}),
                            data={"epochs": "10"})
    core.create_namespaced_config_map("team", cm)
    read = core.read_namespaced_config_map("settings", "team")
    assert read.data == {"epochs": "10"}, read.data
    listed = core.list_namespaced_config_map("team", label_selector="app=train")
    assert [c.metadata.name for c in listed.items] == ["settings"]
    assert core.list_namespaced_config_map("team", label_selector="app=other").items == []
    core.patch_namespaced_config_map("settings", "team", {"data": {"lr": "0.1"}})
    assert core.read_namespaced_config_map("settings", "team").data == {"epochs": "10", "lr": "0.1"}
    print("typed create, read, list by label, merge patch")

    err = expect_error(404, "NotFound", lambda: core.read_namespaced_config_map("missing", "team"))
    assert err.reason == "Not Found", err.reason
    expect_error(404, "NotFound", lambda: core.create_namespaced_config_map(
        "nowhere", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="x"))))
    print("not found")

    # Server-side apply: the configmap's epochs belong to this client's create ("Update"), so
    # another manager changing it conflicts until it forces.
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "settings", "namespace": "team"}, "data": {"epochs": "20"}}
    expect_error(409, "Conflict", lambda: core.patch_namespaced_config_map(
        "settings", "team", body, field_manager="dsinfra", _content_type=APPLY))
    applied = core.patch_namespaced_config_map(
        "settings", "team", body, field_manager="dsinfra", force=True, _content_type=APPLY)
    assert applied.data["epochs"] == "20", applied.data
    managers = sorted(f.manager for f in applied.metadata.managed_fields)
    assert "dsinfra" in managers, managers
    again = core.patch_namespaced_config_map(
        "settings", "team", body, field_manager="dsinfra", _content_type=APPLY)
    assert again.metadata.resource_version == applied.metadata.resource_version, \
        "an apply that changes nothing keeps the resourceVersion"
    print("server-side apply: conflict, force, no-op")

    dyn = dynamic.DynamicClient(api_client)
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": "team"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "trainer"}},
                 "template": {"metadata": {"labels": {"app": "trainer"}},
                              "spec": {"containers": [{"name": "t", "image": "python:3.12"}]}}},
    }
    made = deployments.server_side_apply(body=deployment, namespace="team", field_manager="dsinfra")
    assert made.metadata.generation == 1, made.metadata
    deployment["spec"]["replicas"] = 3
    made = deployments.server_side_apply(body=deployment, namespace="team", field_manager="dsinfra")
    assert made.spec.replicas == 3 and made.metadata.generation == 2, made.metadata
    broken = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "broken", "namespace": "team"}, "spec": {"replicas": 1}}
    expect_error(422, "Invalid", lambda: deployments.server_side_apply(
        body=broken, namespace="team", field_manager="dsinfra"))
    print("dynamic client: discovery, apply, generation, a missing selector is 422")

    crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.server_side_apply(field_manager="dsinfra", body={
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "datasets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
                 "names": {"kind": "Dataset", "plural": "datasets", "singular": "dataset"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "required": ["path"],
                         "properties": {"path": {"type": "string"},
                                        "replicas": {"type": "integer", "minimum": 1}}}}}}}]}})
    dyn = dynamic.DynamicClient(api_client)  # discovery again: the new kind
    datasets = dyn.resources.get(api_version="example.com/v1", kind="Dataset")
    datasets.server_side_apply(namespace="team", field_manager="dsinfra", body={
        "apiVersion": "example.com/v1", "kind": "Dataset",
        "metadata": {"name": "images", "namespace": "team"}, "spec": {"path": "/data", "replicas": 2}})
    expect_error(422, "Invalid", lambda: datasets.server_side_apply(
        namespace="team", field_manager="dsinfra", body={
            "apiVersion": "example.com/v1", "kind": "Dataset",
            "metadata": {"name": "bad", "namespace": "team"}, "spec": {"replicas": 0}}))
    assert [d.metadata.name for d in datasets.get(namespace="team").items] == ["images"]
    crds.delete(name="datasets.example.com")
    print("CRD: served, its schema enforced, deleted with its resources")

    core.delete_namespaced_config_map("settings", "team")
    expect_error(404, "NotFound", lambda: core.delete_namespaced_config_map("settings", "team"))
    core.delete_namespace("team")
    expect_error(404, "NotFound", lambda: deployments.get(name="trainer", namespace="team"))
    print("deletes; a namespace takes what it holds")


if __name__ == "__main__":
    main(sys.argv[1])
