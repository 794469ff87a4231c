//! What a connected `plan`, `apply` or `destroy` starts from: the manifest judged against every
//! size it names, and the connection the operation then uses.
//!
//! The manifest is read once ([`manifest::Read`]: parsed, checked, its variables resolved) and
//! judged against the sizes known so far, collecting those the shipped catalog lacks instead of
//! refusing them. The command connects with the manifest's Azure settings; through that
//! connection the sizes are learnt from the live Resource SKUs ([`super::learn_sizes`]), and the
//! read manifest is judged again against what was learnt: it is not read or parsed again. When
//! nothing was unknown and nothing learnt, the first judgement is the answer.

use super::{Arm, Cancel, Error, Events, learn_sizes};
use crate::manifest::{LoadFailed, Loaded, Read};
use crate::model::AzureSettings;

/// Why [`prepare`] stopped before an operation could start.
#[derive(Debug)]
pub enum PrepareError {
    /// The manifest has problems (not connected: its settings may be what is wrong).
    Manifest(LoadFailed),
    /// Ctrl-C, while connecting or learning sizes.
    Op(Error),
}

/// What an operation starts from: the judged manifest, and the connection (or why connecting
/// failed: the caller shows the manifest's warnings first, as if it had connected after loading).
pub struct Prepared<C> {
    /// The manifest, judged against every size it names.
    pub loaded: Loaded,
    /// The connection `connect` made.
    pub connection: Result<C, Error>,
}

/// Judge `read` against what Azure knows of its sizes, connecting with `connect` (given the
/// manifest's Azure settings); `arm_of` finds the ARM client in the connection, if it has one.
///
/// # Errors
///
/// The manifest has problems; Ctrl-C.
pub async fn prepare<C>(
    read: &Read<'_>,
    arm_of: impl Fn(&C) -> Option<&Arm>,
    connect: impl AsyncFnOnce(&AzureSettings) -> Result<C, Error>,
    events: &Events,
    cancel: &Cancel,
) -> Result<Prepared<C>, PrepareError> {
    let first = match read.judge(read.catalog(), true) {
        Ok(first) => first,
        // The lenient judgement forgives unknown sizes only: the usual one fails too, and says
        // why (a size no catalog has is among its problems, with the catalog's suggestion).
        Err(lenient) => {
            let usual = read.judge(read.catalog(), false).err();
            return Err(PrepareError::Manifest(usual.unwrap_or(lenient)));
        }
    };
    let connection = cancel
        .interruptible(connect(&first.desired.azure))
        .await
        .map_err(|e| PrepareError::Op(e.into()))?;
    let arm = match &connection {
        Ok(conn) => arm_of(conn).map(Ok),
        Err(err) => Some(Err(err)),
    };
    let catalog = match arm {
        Some(arm) => {
            let learning = learn_sizes(arm, &first.desired, &first.unknown_sizes, events);
            cancel
                .interruptible(learning)
                .await
                .map_err(|e| PrepareError::Op(e.into()))?
        }
        None => first.desired.catalog.clone(),
    };
    let loaded = if first.unknown_sizes.is_empty() && catalog == first.desired.catalog {
        first
    } else {
        read.judge(&catalog, false)
            .map_err(PrepareError::Manifest)?
    };
    Ok(Prepared { loaded, connection })
}
