//! A small Kubernetes API client for what apply does to a cluster: discovery (which URL serves
//! a kind), server-side apply, get and delete, with the cluster's kubeconfig (its server, its CA,
//! its user's token). Its own, as the ARM client is: the calls are few and typed by JSON.

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine as _;
use serde_json::Value;

use crate::secret::Secret;

/// The field manager dsinfra applies as: the owner of every field it sets.
pub const FIELD_MANAGER: &str = "dsinfra";

/// How a kubeconfig's user signs in.
#[derive(Debug)]
pub enum Auth {
    /// A static token (a cluster with local accounts).
    Token(Secret<String>),
    /// Entra ID: AKS's kubeconfig runs `kubelogin get-token --server-id ID`; the token is for
    /// the scope `ID/.default`, from dsinfra's own credential.
    Entra { server_id: String },
}

/// The kubeconfig's first user's way to sign in.
///
/// # Errors
///
/// It is not YAML, or its user has neither a token nor kubelogin's `--server-id`.
pub fn auth(kubeconfig: &Secret<String>) -> Result<Auth, String> {
    let config: Value = serde_yaml_ng::from_str(kubeconfig.expose())
        .map_err(|e| format!("the kubeconfig is not YAML: {e}"))?;
    let user = config
        .pointer("/users/0/user")
        .cloned()
        .unwrap_or(Value::Null);
    if let Some(token) = user.get("token").and_then(Value::as_str) {
        return Ok(Auth::Token(Secret::registered(token.to_owned())));
    }
    let args: Vec<&str> = user
        .pointer("/exec/args")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    args.iter()
        .position(|a| *a == "--server-id")
        .and_then(|i| args.get(i + 1))
        .map(|id| Auth::Entra {
            server_id: (*id).to_owned(),
        })
        .ok_or_else(|| {
            "the kubeconfig's user has neither a token nor kubelogin's --server-id: dsinfra cannot sign in to this cluster".to_owned()
        })
}

/// Where a kind is served.
#[derive(Debug, Clone)]
pub struct Served {
    /// `/api/v1` or `/apis/{group}/{version}`.
    prefix: String,
    plural: String,
    pub namespaced: bool,
}

/// A cluster's API, as its kubeconfig describes it.
pub struct Cluster {
    http: reqwest::Client,
    server: String,
    token: Secret<String>,
    /// `(apiVersion, kind)` -> where it is served.
    kinds: BTreeMap<(String, String), Served>,
}

impl Cluster {
    /// The cluster of a kubeconfig (its first cluster), signed in with `token` (see [`auth`]).
    ///
    /// # Errors
    ///
    /// The kubeconfig is not YAML, has no server, or a CA the client cannot read.
    pub fn from_kubeconfig(
        kubeconfig: &Secret<String>,
        token: Secret<String>,
    ) -> Result<Self, String> {
        let config: Value = serde_yaml_ng::from_str(kubeconfig.expose())
            .map_err(|e| format!("the kubeconfig is not YAML: {e}"))?;
        let server = config
            .pointer("/clusters/0/cluster/server")
            .and_then(Value::as_str)
            .ok_or("the kubeconfig names no server")?
            .trim_end_matches('/')
            .to_owned();
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_mins(1))
            .connect_timeout(Duration::from_secs(10));
        if let Some(ca) = config
            .pointer("/clusters/0/cluster/certificate-authority-data")
            .and_then(Value::as_str)
        {
            let pem = base64::engine::general_purpose::STANDARD
                .decode(ca.trim())
                .map_err(|e| {
                    format!("the kubeconfig's certificate-authority-data is not base64: {e}")
                })?;
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| format!("the kubeconfig's CA is not a PEM certificate: {e}"))?;
            // The cluster's own CA, and only it, vouches for its API server (as kubectl trusts it).
            builder = builder.tls_certs_only([cert]);
        }
        let http = builder
            .build()
            .map_err(|e| format!("cannot make the Kubernetes client: {e}"))?;
        Ok(Self {
            http,
            server,
            token,
            kinds: BTreeMap::new(),
        })
    }

    /// Reads which kinds the cluster serves (again: a CRD applied since adds its kinds).
    ///
    /// # Errors
    ///
    /// The API server did not answer or answered something that is not discovery.
    pub async fn discover(&mut self) -> Result<(), String> {
        let mut kinds = BTreeMap::new();
        let mut lists = vec!["/api/v1".to_owned()];
        let groups = self.get_json("/apis").await?.unwrap_or(Value::Null);
        for group in groups["groups"].as_array().into_iter().flatten() {
            for version in group["versions"].as_array().into_iter().flatten() {
                if let Some(gv) = version["groupVersion"].as_str() {
                    lists.push(format!("/apis/{gv}"));
                }
            }
        }
        for prefix in lists {
            let Some(list) = self.get_json(&prefix).await? else {
                continue;
            };
            let api_version = list["groupVersion"].as_str().unwrap_or_default().to_owned();
            for resource in list["resources"].as_array().into_iter().flatten() {
                let plural = resource["name"].as_str().unwrap_or_default();
                if plural.contains('/') {
                    continue; // a subresource (`deployments/scale`)
                }
                let kind = resource["kind"].as_str().unwrap_or_default().to_owned();
                kinds.insert(
                    (api_version.clone(), kind),
                    Served {
                        prefix: prefix.clone(),
                        plural: plural.to_owned(),
                        namespaced: resource["namespaced"].as_bool().unwrap_or(false),
                    },
                );
            }
        }
        self.kinds = kinds;
        Ok(())
    }

    /// Where a kind is served, if the cluster serves it.
    pub fn served(&self, api_version: &str, kind: &str) -> Option<&Served> {
        self.kinds.get(&(api_version.to_owned(), kind.to_owned()))
    }

    fn url(served: &Served, namespace: Option<&str>, name: &str) -> String {
        match namespace {
            Some(ns) if served.namespaced => {
                format!("{}/namespaces/{ns}/{}/{name}", served.prefix, served.plural)
            }
            _ => format!("{}/{}/{name}", served.prefix, served.plural),
        }
    }

    /// The object, or `None` if it does not exist.
    ///
    /// # Errors
    ///
    /// The API server did not answer, or refused.
    pub async fn get(
        &self,
        served: &Served,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>, String> {
        self.get_json(&Self::url(served, namespace, name)).await
    }

    /// Server-side apply as [`FIELD_MANAGER`], taking over fields another manager set (the
    /// manifest is the truth), with the server's strict field validation. Idempotent: safe to
    /// repeat.
    ///
    /// # Errors
    ///
    /// The API server refused the object (its message, as it said it) or did not answer.
    pub async fn apply(&self, served: &Served, object: &Value) -> Result<Value, String> {
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str);
        let name = object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let url = format!(
            "{}{}?fieldManager={FIELD_MANAGER}&force=true&fieldValidation=Strict",
            self.server,
            Self::url(served, namespace, name)
        );
        let response = self
            .http
            .patch(url)
            .bearer_auth(self.token.expose())
            .header("content-type", "application/apply-patch+yaml")
            .header("accept", "application/json")
            .body(object.to_string())
            .send()
            .await
            .map_err(|e| format!("the API server did not answer: {e}"))?;
        answer(response)
            .await?
            .ok_or_else(|| "the object is gone".to_owned())
    }

    /// Deletes the object; one already gone is no error.
    ///
    /// # Errors
    ///
    /// The API server refused or did not answer.
    pub async fn delete(
        &self,
        served: &Served,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), String> {
        let response = self
            .http
            .delete(format!(
                "{}{}",
                self.server,
                Self::url(served, namespace, name)
            ))
            .bearer_auth(self.token.expose())
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("the API server did not answer: {e}"))?;
        answer(response).await.map(|_| ())
    }

    async fn get_json(&self, path: &str) -> Result<Option<Value>, String> {
        let response = self
            .http
            .get(format!("{}{path}", self.server))
            .bearer_auth(self.token.expose())
            .header("accept", "application/json")
            .send()
            .await
            .map_err(|e| format!("the API server at {} did not answer: {e}", self.server))?;
        answer(response).await
    }
}

/// A 2xx body, `None` for a 404, or the API server's own message.
async fn answer(response: reqwest::Response) -> Result<Option<Value>, String> {
    let status = response.status();
    let text = response
        .text()
        .await
        .map_err(|e| format!("the answer did not arrive: {e}"))?;
    if status.as_u16() == 404 {
        return Ok(None);
    }
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if status.is_success() {
        return Ok(Some(body));
    }
    let message = body["message"]
        .as_str()
        .map_or_else(|| text.trim().to_owned(), str::to_owned);
    Err(format!(
        "{} {}: {message}",
        status.as_u16(),
        body["reason"].as_str().unwrap_or("")
    ))
}
