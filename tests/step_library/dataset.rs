//! The skewed test dataset shared by tests/step_library.rs and benches/shard_balance.rs: 64
//! CosmoFlow-like files named `univ_NNN.tfrecord` where every fourth file is about eight times
//! larger than the others. That is the case the seed's name-modulo sharding handles worst (on
//! four nodes, rank 0 gets every large file) and a realistic one (mixed simulation sizes).
//! Contents are deterministic pseudo-random bytes, so gzip cannot shrink them and the stored
//! (compressed) sizes keep the skew.

/// Number of files.
pub const FILES: usize = 64;

/// `(file name, uncompressed content)` for every file, in name order.
pub fn files() -> Vec<(String, Vec<u8>)> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        // xorshift64*: fast, deterministic, good enough to defeat gzip.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    (0..FILES)
        .map(|i| {
            let kib = if i % 4 == 0 {
                48 + (i * 7) % 33
            } else {
                4 + (i * 37) % 23
            };
            let len = kib * 1024 + (i * 131) % 1000;
            let mut content = Vec::with_capacity(len + 8);
            while content.len() < len {
                content.extend_from_slice(&next().to_le_bytes());
            }
            content.truncate(len);
            (format!("univ_{i:03}.tfrecord"), content)
        })
        .collect()
}

/// `n` synthetic blob names and sizes at CosmoFlow's scale (its training set is ~300,000 gzip
/// content-encoded files): the stage-at-scale test checks what the benchmark times, on the same
/// listing.
pub fn cosmoflow_listing(n: usize) -> Vec<dsinfra::storage::BlobItem> {
    (0..n)
        .map(|i| dsinfra::storage::BlobItem {
            name: format!(
                "cosmoUniverse/train/univ_ics_2019-03_a{:07}_{:03}.tfrecord.gz",
                i / 8,
                i % 8
            ),
            size: 1_000_000 + (i as u64 * 7_919) % 3_000_000,
            content_encoding: Some("gzip".to_owned()),
            snapshot: None,
        })
        .collect()
}
