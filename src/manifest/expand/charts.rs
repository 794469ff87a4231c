//! An `aks` block's `chart`: a Helm chart the user names (a local path, or a repository, chart
//! and version), rendered by the user's own `helm template` when the manifest is read, its
//! objects applied like a `manifest` file's (decision 74). dsinfra never ships a chart, and
//! without Helm a manifest with a chart is refused where the chart is written, before anything
//! is planned.

use std::io::Write as _;
use std::path::PathBuf;
use std::process::Command;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::addr::Address;
use crate::diag::Diagnostic;
use crate::model::KubeObject;

use super::super::decode::{self, BlockAttrs, Located, Unknown};
use super::super::eval::EvalBlock;
use super::Expander;
use super::check::Check;
use super::kube_objects::{documents, is_dns_label, object};

/// The variable naming the `helm` to run; otherwise `helm` on the PATH.
pub(crate) const HELM_ENV: &str = "DSINFRA_HELM";

#[derive(Deserialize, Default)]
struct ChartAttrs {
    path: Option<Located<String>>,
    repository: Option<Located<String>>,
    chart: Option<Located<String>>,
    version: Option<Located<String>>,
    namespace: Option<Located<String>>,
    values: Option<Located<Value>>,
}

impl BlockAttrs for ChartAttrs {}

/// A `chart` block's objects: its rendering, each object without a namespace put in the chart's
/// (and that namespace made, as `helm install --create-namespace` does).
pub(super) fn read(ex: &mut Expander<'_>, block: &EvalBlock, cluster: &Address) -> Vec<KubeObject> {
    let attrs: ChartAttrs = decode::decode(block, Unknown::Checked, ex.diags).unwrap_or_default();
    let release = block.label().to_owned();
    let base_dir = ex.base_dir.clone();
    let mut check = Check::new(block, ex.diags);
    if !(is_dns_label(&release) && release.len() <= 53) {
        check.report(
            Diagnostic::error(format!("invalid release name `{release}`"))
                .with_span(block.label_span())
                .with_label("Helm names a release with 1-53 lowercase letters, digits and `-`")
                .with_help("e.g. `chart \"alluxio-operator\"`"),
        );
        return Vec::new();
    }
    let namespace = match &attrs.namespace {
        Some(ns) if !is_dns_label(&ns.value) => {
            check.report(
                Diagnostic::error(format!("invalid `namespace` {:?}", ns.value))
                    .with_span(ns.span.clone())
                    .with_label("1-63 lowercase letters, digits and `-`"),
            );
            return Vec::new();
        }
        Some(ns) => ns.value.clone(),
        None => "default".to_owned(),
    };
    // Both are said when both are wrong.
    let source = chart_source(&mut check, &attrs, &base_dir);
    let helm = helm();
    if helm.is_none() {
        let title = check.title();
        let why = std::env::var_os(HELM_ENV).map_or_else(
            || "no `helm` on the PATH and DSINFRA_HELM is not set".to_owned(),
            |path| {
                format!(
                    "DSINFRA_HELM names {}, which is not a file",
                    PathBuf::from(path).display()
                )
            },
        );
        check.report(
            Diagnostic::error(format!("{title} needs Helm to render the chart, and none was found"))
                .with_span(block.header.clone())
                .with_label(why)
                .with_help("install Helm 3 (https://helm.sh/docs/intro/install/) or set DSINFRA_HELM to its path; dsinfra renders charts with your Helm and never ships one"),
        );
    }
    let (Some(source), Some(helm)) = (source, helm) else {
        return Vec::new();
    };
    let rendered = render(
        &helm,
        &release,
        &namespace,
        &source,
        attrs.values.as_ref().map(|v| &v.value),
    );
    let text = match rendered {
        Ok(text) => text,
        Err(why) => {
            let title = check.title();
            check.report(
                Diagnostic::error(format!("{title}: `helm template` failed"))
                    .with_span(block.header.clone())
                    .with_label(why)
                    .with_help("run the same `helm template` yourself to see the whole message"),
            );
            return Vec::new();
        }
    };
    let origin = format!("the rendering of chart {release:?}");
    let values = match documents(&text, &origin) {
        Ok(values) => values,
        Err((why, hint)) => {
            check.report(
                Diagnostic::error(format!(
                    "chart {release:?} did not render Kubernetes objects"
                ))
                .with_span(block.header.clone())
                .with_label(why)
                .with_help(hint),
            );
            return Vec::new();
        }
    };
    let from = format!("chart {release:?}");
    let mut objects = Vec::new();
    if !matches!(namespace.as_str(), "default" | "kube-system") {
        objects.push(object(
            cluster,
            &from,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
        ));
    }
    objects.extend(values.into_iter().map(|value| KubeObject {
        fallback_namespace: Some(namespace.clone()),
        ..object(cluster, &from, value)
    }));
    objects
}

/// Where the chart comes from: a local path (a directory or a packaged `.tgz`), or a repository
/// with a chart name and a version (pinned: a chart moving under the manifest would change the
/// cluster without a change of the manifest).
enum Source {
    Path(PathBuf),
    Repository {
        url: String,
        chart: String,
        version: String,
    },
}

fn chart_source(
    check: &mut Check<'_>,
    attrs: &ChartAttrs,
    base_dir: &std::path::Path,
) -> Option<Source> {
    let title = check.title();
    match (&attrs.path, &attrs.repository, &attrs.chart) {
        (Some(path), None, None) => {
            let full = base_dir.join(&path.value);
            if full.exists() {
                return Some(Source::Path(full));
            }
            check.report(
                Diagnostic::error(format!("{title} names a chart that is not there"))
                    .with_span(path.span.clone())
                    .with_label(format!("{} does not exist", full.display()))
                    .with_help(
                        "give the chart's directory or .tgz, relative to the manifest's directory",
                    ),
            );
            None
        }
        (None, Some(url), Some(chart)) => {
            if let Some(version) = &attrs.version {
                return Some(Source::Repository {
                    url: url.value.clone(),
                    chart: chart.value.clone(),
                    version: version.value.clone(),
                });
            }
            check.report(
                Diagnostic::error(format!("{title} names a repository chart without a `version`"))
                    .with_span(chart.span.clone())
                    .with_label("which release of the chart?")
                    .with_help("pin it, e.g. version = \"1.2.0\": a chart that moves would change the cluster while the manifest did not"),
            );
            None
        }
        _ => {
            check.report(
                Diagnostic::error(format!("{title} needs either `path`, or `repository` and `chart`"))
                    .with_span(check.block().header.clone())
                    .with_label("a chart comes from one place")
                    .with_help("path = \"charts/my-chart\", or repository = \"https://...\" with chart = \"name\" and version = \"x.y.z\""),
            );
            None
        }
    }
}

/// The `helm` to run: `$DSINFRA_HELM`, else the first `helm` on the PATH.
fn helm() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(HELM_ENV) {
        let path = PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("helm"))
        .find(|candidate| candidate.is_file())
}

/// `helm template RELEASE CHART --namespace NS --include-crds [--repo URL --version V]
/// [--values FILE]`: the chart's objects as YAML. The values go through a private temporary
/// file, removed afterwards (they may hold secrets).
fn render(
    helm: &std::path::Path,
    release: &str,
    namespace: &str,
    source: &Source,
    values: Option<&Value>,
) -> Result<String, String> {
    let mut command = Command::new(helm);
    command.args(["template", release]);
    match source {
        Source::Path(path) => {
            command.arg(path);
        }
        Source::Repository {
            url,
            chart,
            version,
        } => {
            command
                .arg(chart)
                .args(["--repo", url, "--version", version]);
        }
    }
    command.args(["--namespace", namespace, "--include-crds"]);
    let values_file = match values {
        Some(values) => {
            let file = private_values_file(values)
                .map_err(|e| format!("cannot write the chart's values: {e}"))?;
            command.arg("--values").arg(&file);
            Some(file)
        }
        None => None,
    };
    let output = command.output();
    if let Some(file) = values_file {
        let _ = std::fs::remove_file(file);
    }
    let output = output.map_err(|e| format!("could not run {}: {e}", helm.display()))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no message");
        return Err(first.trim().to_owned());
    }
    String::from_utf8(output.stdout).map_err(|_| "helm's output is not UTF-8 text".to_owned())
}

/// The values as a JSON (hence YAML) file readable by the user alone.
fn private_values_file(values: &Value) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = std::env::temp_dir().join(format!(
        "dsinfra-values-{}-{nanos}.json",
        std::process::id()
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)?;
    file.write_all(values.to_string().as_bytes())?;
    Ok(path)
}
