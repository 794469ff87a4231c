//! The TLS side of the emulator: AKS clusters' Kubernetes API is served over https, as a real
//! cluster's is, because kubectl (client-go) sends a bearer token only over TLS. At start the
//! emulator makes a CA and a certificate for 127.0.0.1 signed by it; the kubeconfigs it hands
//! out carry the CA (`certificate-authority-data`), so clients verify the server for real.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::server::TlsStream;

use super::error::EmulatorError;

/// The CA clients trust (PEM) and the server's TLS configuration.
pub(crate) struct ServerIdentity {
    pub ca_pem: String,
    pub config: Arc<ServerConfig>,
}

/// A fresh CA and a certificate for `127.0.0.1` and `localhost` signed by it.
pub(crate) fn identity() -> Result<ServerIdentity, EmulatorError> {
    let tls = |e: &dyn std::fmt::Display| EmulatorError::Tls(e.to_string());
    let ca_key = KeyPair::generate().map_err(|e| tls(&e))?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| tls(&e))?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "dsinfra emulator Kubernetes CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca.self_signed(&ca_key).map_err(|e| tls(&e))?;
    let issuer = Issuer::new(ca, ca_key);
    let key = KeyPair::generate().map_err(|e| tls(&e))?;
    let mut leaf = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .map_err(|e| tls(&e))?;
    leaf.distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let cert = leaf.signed_by(&key, &issuer).map_err(|e| tls(&e))?;
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone(), ca_cert.der().clone()];
    let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let config = ServerConfig::builder_with_provider(Arc::new(
        tokio_rustls::rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| tls(&e))?
    .with_no_client_auth()
    .with_single_cert(chain, private)
    .map_err(|e| tls(&e))?;
    Ok(ServerIdentity {
        ca_pem: ca_cert.pem(),
        config: Arc::new(config),
    })
}

/// A TCP listener whose connections are TLS: a failed handshake is dropped, not served.
pub(crate) struct TlsListener {
    pub tcp: TcpListener,
    pub acceptor: TlsAcceptor,
}

/// How long a client may take to finish its handshake before it is dropped.
const HANDSHAKE: Duration = Duration::from_secs(10);

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let Ok((stream, addr)) = self.tcp.accept().await else {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            };
            match tokio::time::timeout(HANDSHAKE, self.acceptor.accept(stream)).await {
                Ok(Ok(tls)) => return (tls, addr),
                Ok(Err(err)) => tracing::debug!(%err, "Kubernetes API: TLS handshake failed"),
                Err(_) => tracing::debug!("Kubernetes API: TLS handshake timed out"),
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
