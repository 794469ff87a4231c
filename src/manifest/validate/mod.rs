//! Value checks that do not depend on the rest of the manifest: CIDRs, SSH keys, durations and
//! times, time zones, SAS permissions. Each returns what is wrong in words a user can act on; the
//! caller locates it.

pub(super) mod cidr;
pub(super) mod ssh_key;
pub(super) mod time;
