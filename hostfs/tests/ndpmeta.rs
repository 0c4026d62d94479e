//! `.ndpmeta` round-trips for random directories (long names, subdirectories, fragmented
//! files), and every corruption is detected rather than trusted.

use csd_hostfs::ndpmeta::*;
use proptest::prelude::*;

fn perms() -> impl Strategy<Value = Perms> {
    prop_oneof![
        3 => Just(Perms { uid: 1000, gid: 1000, mode: 0o644 }),
        1 => (0u32..=MAX_ID, 0u32..=MAX_ID, 0u16..0o7777).prop_map(|(uid, gid, mode)| Perms { uid, gid, mode }),
    ]
}

fn entry() -> impl Strategy<Value = NdpEntry> {
    let name = prop_oneof![
        "[a-z0-9_.-]{1,32}",
        "[a-zA-Z0-9_ -]{33,255}",
        // Names that end exactly on a slot boundary.
        Just("x".repeat(32)),
        Just("y".repeat(32 + 120)),
        Just("é".repeat(100)),
    ]
    .prop_filter("not . or ..", |n: &String| n != "." && n != "..");
    let layout = prop_oneof![
        4 => prop::collection::vec((0u32..u32::MAX, 1u32..1 << 20), 0..=MAX_EXTENTS)
            .prop_map(|x| Layout::Extents(x.into_iter().map(|(first_block, blocks)| BlockExtent { first_block, blocks }).collect())),
        1 => Just(Layout::TooFragmented),
    ];
    (
        name,
        any::<bool>(),
        any::<u64>(),
        any::<u64>(),
        perms(),
        layout,
    )
        .prop_map(|(name, dir, ino, length, perms, layout)| NdpEntry {
            name,
            kind: if dir { EntryKind::Dir } else { EntryKind::File },
            ino,
            length,
            perms,
            layout,
        })
}

fn directory() -> impl Strategy<Value = NdpMeta> {
    prop::collection::vec(entry(), 0..40).prop_map(|mut entries| {
        let mut seen = std::collections::BTreeSet::new();
        entries.retain(|e| seen.insert(e.name.clone()));
        NdpMeta::new(entries)
    })
}

proptest! {
    #[test]
    fn encode_then_decode_is_the_identity(meta in directory()) {
        let bytes = meta.encode().unwrap();
        prop_assert_eq!(bytes.len(), meta.encoded_len());
        prop_assert_eq!(bytes.len() % SLOT_BYTES, 0);
        prop_assert_eq!(NdpMeta::decode(&bytes).unwrap(), meta);
    }

    #[test]
    fn any_single_byte_corruption_is_detected(meta in directory(), at in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let mut bytes = meta.encode().unwrap();
        let i = at.index(bytes.len());
        bytes[i] ^= flip;
        prop_assert!(NdpMeta::decode(&bytes).is_err(), "corruption at byte {} not detected", i);
    }

    #[test]
    fn truncation_and_extension_are_detected(meta in directory(), cut in 1usize..300) {
        let bytes = meta.encode().unwrap();
        let short = &bytes[..bytes.len().saturating_sub(cut)];
        prop_assert!(NdpMeta::decode(short).is_err());
        let mut long = bytes.clone();
        long.extend(std::iter::repeat_n(0u8, cut));
        prop_assert!(NdpMeta::decode(&long).is_err());
    }
}

#[test]
fn header_aggregates_permissions_only_when_all_entries_agree() {
    let p = Perms {
        uid: 7,
        gid: 8,
        mode: 0o640,
    };
    let file = |name: &str, perms| NdpEntry {
        name: name.into(),
        kind: EntryKind::File,
        ino: 1,
        length: 10,
        perms,
        layout: Layout::Extents(vec![BlockExtent {
            first_block: 5,
            blocks: 1,
        }]),
    };
    let same = NdpMeta::new(vec![file("a", p), file("b", p)]);
    assert_eq!(same.aggregated, Some(p));
    let mixed = NdpMeta::new(vec![file("a", p), file("b", Perms { mode: 0o600, ..p })]);
    assert_eq!(mixed.aggregated, None);
    assert_eq!(
        NdpMeta::decode(&mixed.encode().unwrap())
            .unwrap()
            .aggregated,
        None
    );
    // Storage overhead: 128 bytes per entry plus one header slot (LightFS §III-B3).
    assert_eq!(same.encode().unwrap().len(), 3 * 128);
}

#[test]
fn what_cannot_be_stored_is_refused_with_a_reason() {
    let ok = NdpEntry {
        name: "f".into(),
        kind: EntryKind::File,
        ino: 1,
        length: 1,
        perms: Perms {
            uid: 0,
            gid: 0,
            mode: 0o644,
        },
        layout: Layout::Extents(vec![]),
    };
    let cases = [
        (
            NdpEntry {
                name: "a/b".into(),
                ..ok.clone()
            },
            "not a valid file name",
        ),
        (
            NdpEntry {
                name: "n".repeat(256),
                ..ok.clone()
            },
            "names are 1 to 255 bytes",
        ),
        (
            NdpEntry {
                perms: Perms {
                    uid: 1 << 24,
                    ..ok.perms
                },
                ..ok.clone()
            },
            "24-bit",
        ),
        (
            NdpEntry {
                layout: Layout::Extents(vec![
                    BlockExtent {
                        first_block: 0,
                        blocks: 1
                    };
                    9
                ]),
                ..ok.clone()
            },
            "TooFragmented",
        ),
    ];
    for (entry, expected) in cases {
        let e = NdpMeta::new(vec![entry]).encode().unwrap_err().to_string();
        assert!(e.contains(expected), "{e}");
    }
    let dup = NdpMeta::new(vec![ok.clone(), ok])
        .encode()
        .unwrap_err()
        .to_string();
    assert!(dup.contains("duplicate name"), "{dup}");
}

#[test]
fn decode_errors_name_the_problem() {
    assert_eq!(
        NdpMeta::decode(&[0u8; 100]),
        Err(NdpMetaError::BadLength(100))
    );
    assert_eq!(NdpMeta::decode(&[0u8; 128]), Err(NdpMetaError::BadMagic));
    let mut bytes = NdpMeta::new(vec![]).encode().unwrap();
    bytes[8] = 9;
    assert_eq!(
        NdpMeta::decode(&bytes),
        Err(NdpMetaError::UnsupportedVersion(9))
    );
    let mut bytes = NdpMeta::new(vec![]).encode().unwrap();
    bytes[50] = 1;
    assert!(matches!(
        NdpMeta::decode(&bytes),
        Err(NdpMetaError::Checksum { .. })
    ));
}
