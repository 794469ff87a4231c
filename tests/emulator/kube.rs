//! The Kubernetes API an emulated AKS cluster serves, driven by clients nobody here wrote: the
//! real kubectl (server-side apply, get, delete, field validation, CRDs) and the official Python
//! client (tests/kube/client.py), both pinned in tests/kube/requirements.txt, with the kubeconfig
//! `listClusterUserCredential` returns (https, the emulator's CA, the cluster's token). Objects
//! are checked against kubernetes-validate's published schemas (DSINFRA_KUBE_SCHEMAS).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use base64::Engine as _;

use super::*;

const AKS: &str = "2025-10-01";

/// A tool of the kube virtualenv (`DSINFRA_KUBECTL`'s directory, or the tools directory's):
/// `None` outside CI when it is missing, after saying why; under CI a missing tool fails.
fn kube_tool(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("DSINFRA_KUBECTL")
        .map(|k| PathBuf::from(k).parent().expect("a directory").to_owned())
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/dsinfra/tools/kube/bin"))
        })?;
    let path = dir.join(name);
    if path.is_file() {
        return Some(path);
    }
    let why = format!(
        "{} is missing (run `bash scripts/test --install-only`)",
        path.display()
    );
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{why}; it is required under CI"
    );
    eprintln!("SKIPPING the Kubernetes API test: {why}");
    None
}

/// kubernetes-validate's schemas (`DSINFRA_KUBE_SCHEMAS`, as scripts/test sets it).
fn schemas() -> Option<Arc<dsinfra::kubeschema::Schemas>> {
    match dsinfra::kubeschema::Schemas::from_env() {
        Ok(Some(schemas)) => Some(Arc::new(schemas)),
        Ok(None) => {
            let why = "DSINFRA_KUBE_SCHEMAS is not set (scripts/test sets it)";
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "{why}; it is required under CI"
            );
            eprintln!("SKIPPING the Kubernetes API test: {why}");
            None
        }
        Err(err) => panic!("{err}"),
    }
}

/// An emulator with the published schemas, a cluster in it, and the cluster's kubeconfig.
async fn cluster(dir: &Path) -> Option<(Env, PathBuf)> {
    let schemas = schemas()?;
    let env = env(EmulatorConfig {
        kube_schemas: Some(schemas),
        ..fast()
    })
    .await;
    env.group("rg-kube").await;
    let id = res(
        "rg-kube",
        "Microsoft.ContainerService/managedClusters/train",
    );
    env.create(
        &id,
        AKS,
        &json!({"location": "eastus", "properties": {"dnsPrefix": "train", "agentPoolProfiles": [
            {"name": "system", "count": 1, "vmSize": "Standard_D4s_v5", "mode": "System", "osType": "Linux"}]}}),
    )
    .await;
    let credentials = env
        .post(&format!("{id}/listClusterUserCredential"), AKS)
        .await;
    assert_eq!(credentials.status, 200, "{credentials:?}");
    let kubeconfig = base64::engine::general_purpose::STANDARD
        .decode(
            credentials.body["kubeconfigs"][0]["value"]
                .as_str()
                .expect("a kubeconfig"),
        )
        .expect("base64");
    let path = dir.join("kubeconfig");
    std::fs::write(&path, kubeconfig).expect("written");
    Some((env, path))
}

fn kubectl(kubectl: &Path, kubeconfig: &Path, dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("kubectl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const OBJECTS: &str = "apiVersion: v1
kind: Namespace
metadata:
  name: data
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: data
data:
  epochs: \"10\"
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: data
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: \"nginx:1.27\"}
";

const CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: datasets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Dataset, plural: datasets, singular: dataset}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              path: {type: string}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_kubectl_applies_gets_and_validates_through_the_clusters_kubeconfig() {
    let Some(bin) = kube_tool("kubectl") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let Some((env, kubeconfig)) = cluster(dir.path()).await else {
        return;
    };
    let run = |args: &[&str]| kubectl(&bin, &kubeconfig, dir.path(), args);
    std::fs::write(dir.path().join("objects.yaml"), OBJECTS).expect("written");

    let (ok, out, err) = run(&["apply", "--server-side", "-f", "objects.yaml"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("deployment.apps/web serverside-applied"),
        "{out}"
    );
    let version = || {
        run(&[
            "get",
            "configmap",
            "settings",
            "-n",
            "data",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
        .1
    };
    let before = version();
    assert!(run(&["apply", "--server-side", "-f", "objects.yaml"]).0);
    assert_eq!(
        version(),
        before,
        "an apply that changes nothing keeps the resourceVersion"
    );
    let (ok, out, err) = run(&[
        "get",
        "deployments",
        "-n",
        "data",
        "-o",
        "jsonpath={.items[*].spec.replicas}",
    ]);
    assert!(ok && out == "2", "{out} {err}");

    // Field validation: kubectl asks the server (fieldValidation=Strict) because the OpenAPI v3
    // document says the PATCH takes it; a typo is refused, with --validate=warn dropped.
    let typo = OBJECTS.replace("  epochs: \"10\"", "  epochs: \"10\"\ntypo: 1");
    std::fs::write(dir.path().join("typo.yaml"), typo).expect("written");
    let (ok, _, err) = run(&["apply", "--server-side", "-f", "typo.yaml"]);
    assert!(
        !ok && err.contains(r#"strict decoding error: unknown field "typo""#),
        "{err}"
    );
    let (ok, _, err) = run(&[
        "apply",
        "--server-side",
        "--validate=warn",
        "-f",
        "typo.yaml",
    ]);
    assert!(ok && err.contains(r#"unknown field "typo""#), "{err}");
    let wrong = OBJECTS.replace("replicas: 2", "replicas: two");
    std::fs::write(dir.path().join("wrong.yaml"), wrong).expect("written");
    let (ok, _, err) = run(&["apply", "--server-side", "-f", "wrong.yaml"]);
    assert!(
        !ok && err.contains("cannot be handled as a Deployment") && err.contains("spec.replicas"),
        "{err}"
    );

    env.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_kubectl_uses_crds_deletes_namespaces_and_is_refused_with_another_token() {
    let Some(bin) = kube_tool("kubectl") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let Some((env, kubeconfig)) = cluster(dir.path()).await else {
        return;
    };
    let run = |args: &[&str]| kubectl(&bin, &kubeconfig, dir.path(), args);
    std::fs::write(dir.path().join("objects.yaml"), OBJECTS).expect("written");
    assert!(run(&["apply", "--server-side", "-f", "objects.yaml"]).0);
    // A CRD is served once applied; its custom resources are judged by its schema.
    std::fs::write(dir.path().join("crd.yaml"), CRD).expect("written");
    assert!(run(&["apply", "--server-side", "-f", "crd.yaml"]).0);
    let dataset = "apiVersion: example.com/v1\nkind: Dataset\nmetadata: {name: images, namespace: data}\nspec: {path: /data}\n";
    std::fs::write(dir.path().join("dataset.yaml"), dataset).expect("written");
    let (ok, _, err) = run(&["apply", "--server-side", "-f", "dataset.yaml"]);
    assert!(ok, "{err}");
    let (ok, out, _) = run(&["get", "datasets", "-n", "data", "-o", "name"]);
    assert!(ok && out.trim() == "dataset.example.com/images", "{out}");
    std::fs::write(
        dir.path().join("dataset.yaml"),
        dataset.replace("path:", "paht:"),
    )
    .expect("written");
    let (ok, _, err) = run(&["apply", "--server-side", "-f", "dataset.yaml"]);
    assert!(!ok && err.contains(r#"unknown field "spec.paht""#), "{err}");

    let (ok, _, err) = run(&["delete", "-f", "crd.yaml"]);
    assert!(ok, "{err}");
    let (ok, _, err) = run(&["delete", "namespace", "data"]);
    assert!(ok, "{err}");
    let (ok, out, _) = run(&["get", "configmaps", "-A", "-o", "name"]);
    assert!(
        ok && out.trim().is_empty(),
        "a namespace takes what it holds: {out}"
    );

    // The token is the cluster's: another one is refused.
    let stolen = std::fs::read_to_string(&kubeconfig).expect("read");
    let token = stolen
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .expect("a token");
    std::fs::write(
        dir.path().join("other"),
        stolen.replace(token, "not-the-token"),
    )
    .expect("written");
    let (ok, _, err) = kubectl(
        &bin,
        &dir.path().join("other"),
        dir.path(),
        &["get", "namespaces"],
    );
    assert!(
        !ok && err.contains("You must be logged in to the server"),
        "{err}"
    );
    env.handle.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_python_client_reads_writes_applies_and_discovers_through_the_kubeconfig() {
    let Some(python) = kube_tool("python") else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let Some((env, kubeconfig)) = cluster(dir.path()).await else {
        return;
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/kube/client.py");
    let out = tokio::process::Command::new(python)
        .arg(script)
        .arg(&kubeconfig)
        .output()
        .await
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("deletes; a namespace takes what it holds"),
        "{stdout}"
    );
    env.handle.shutdown().await;
}

/// An Entra-ID cluster's API takes an Entra token (here: the token the emulator's ARM takes,
/// `required_token`), and refuses another; its kubeconfig names kubelogin and AKS's server app.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entra_id_clusters_api_takes_the_token_arm_takes_and_refuses_another() {
    let env = env(EmulatorConfig {
        required_token: Some("test-token".to_owned()),
        ..fast()
    })
    .await;
    env.group("rg-entra").await;
    let id = res(
        "rg-entra",
        "Microsoft.ContainerService/managedClusters/entra",
    );
    env.create(
        &id,
        AKS,
        &json!({"location": "eastus", "properties": {"dnsPrefix": "entra",
            "aadProfile": {"managed": true, "enableAzureRBAC": true}, "disableLocalAccounts": true,
            "agentPoolProfiles": [{"name": "system", "count": 1, "vmSize": "Standard_D4s_v5", "mode": "System", "osType": "Linux"}]}}),
    )
    .await;
    let credentials = env
        .post(&format!("{id}/listClusterUserCredential"), AKS)
        .await;
    let kubeconfig = String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(
                credentials.body["kubeconfigs"][0]["value"]
                    .as_str()
                    .expect("a kubeconfig"),
            )
            .expect("base64"),
    )
    .expect("text");
    assert!(kubeconfig.contains("command: kubelogin"), "{kubeconfig}");
    assert!(
        kubeconfig.contains("--server-id\n      - 6dae42f8-4368-4678-94ff-3960e28e3630"),
        "{kubeconfig}"
    );
    let config: Value = serde_yaml_ng::from_str(&kubeconfig).expect("YAML");
    let server = config["clusters"][0]["cluster"]["server"]
        .as_str()
        .expect("a server");
    let ca = base64::engine::general_purpose::STANDARD
        .decode(
            config["clusters"][0]["cluster"]["certificate-authority-data"]
                .as_str()
                .expect("a CA"),
        )
        .expect("base64");
    let http = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(&ca).expect("PEM")])
        .build()
        .expect("a client");
    let status = |token: &'static str| {
        let request = http.get(format!("{server}/api")).bearer_auth(token);
        async move { request.send().await.expect("answers").status().as_u16() }
    };
    assert_eq!(
        status("test-token").await,
        200,
        "the token ARM takes, verified over TLS with the kubeconfig's CA"
    );
    assert_eq!(status("another-token").await, 401);
    env.handle.shutdown().await;
}
