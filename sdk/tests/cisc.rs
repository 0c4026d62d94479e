//! The CISC-op encoding round-trips, and the shapes FusionFS forbids are refused by name.

use csd_sdk::cisc::*;

fn every_command() -> CiscOp {
    let mut b = CiscBuilder::new();
    b.grain(TxGrain::Micro);
    let data = b.input(vec![7; 100]);
    let needle = b.input(b"ab".to_vec());
    let f = b.open("/logs/wal", true);
    b.write(f, data).pwrite(FileRef::Fd(9), 1 << 40, data);
    let r = b.read(f, 64);
    let p = b.pread(FileRef::Fd(9), 12, 4096);
    let crc = b.process(Stage::Crc32, &[r]);
    let _ = b.process(Stage::Search, &[p, needle]);
    let user = b.process(
        Stage::User {
            task: "mytask".into(),
            export: "scale".into(),
        },
        &[crc, data],
    );
    b.append(f, user)
        .fsync(f)
        .truncate(f, 1 << 33)
        .ret(user)
        .close(f)
        .rename("/logs/wal", "/logs/wal.1")
        .link("/logs/wal.1", "/logs/wal.keep")
        .symlink("wal.1", "/logs/current")
        .unlink("/logs/old");
    b.build().unwrap()
}

fn round_trip(op: &CiscOp) -> CiscOp {
    let page = op.encode().unwrap();
    assert_eq!(page.len(), OP_PAGE_BYTES);
    let buffers = op.inputs.iter().map(|(_, d)| d.clone()).collect();
    CiscOp::decode(&page, buffers).unwrap()
}

#[test]
fn every_command_and_the_prebuilt_ops_round_trip() {
    let ops = [
        every_command(),
        append_crc_write(FileRef::Fd(3), vec![1; 4096], TxGrain::Macro).unwrap(),
        read_modify_write(FileRef::Fd(4), 8192, vec![0xff; 4096], TxGrain::Micro).unwrap(),
        open_write_sync_close("/db/000001.sst", b"kv".to_vec(), TxGrain::Macro).unwrap(),
        read_decompress(FileRef::Fd(5), 0, 1000).unwrap(),
    ];
    for op in &ops {
        assert_eq!(&round_trip(op), op);
    }
    // Every built-in stage survives the trip too.
    for stage in [
        Stage::Compress,
        Stage::Decompress,
        Stage::Sort,
        Stage::Xor,
        Stage::Multiply,
    ] {
        let mut b = CiscBuilder::new();
        let a = b.input(vec![1, 2, 3, 4]);
        let inputs = if stage.takes(1) { vec![a] } else { vec![a, a] };
        let out = b.process(stage, &inputs);
        b.ret(out);
        let op = b.build().unwrap();
        assert_eq!(round_trip(&op), op);
    }
}

#[test]
fn thirty_two_commands_fit_a_page_and_thirty_three_are_refused() {
    let mut b = CiscBuilder::new();
    let d = b.input(vec![0; 8]);
    for _ in 0..MAX_COMMANDS {
        b.append(FileRef::Fd(1), d);
    }
    let op = b.build().unwrap();
    assert!(op.encoded_len() <= OP_PAGE_BYTES);
    assert_eq!(round_trip(&op), op);
    b.append(FileRef::Fd(1), d);
    let e = b.build().unwrap_err();
    assert_eq!(
        e,
        CiscError::TooManyCommands {
            commands: 33,
            max: 32
        }
    );
    assert!(e.to_string().contains("at most 32 commands"), "{e}");
}

#[test]
fn a_slot_read_before_it_was_written_is_refused() {
    let op = CiscOp {
        commands: vec![Command::Append {
            file: FileRef::Fd(1),
            from: Slot(3),
        }],
        ..CiscOp::default()
    };
    let e = op.validate().unwrap_err();
    assert_eq!(
        e,
        CiscError::SlotUnset {
            command: 0,
            slot: 3
        }
    );
    assert!(e
        .to_string()
        .contains("before any input or earlier command"));
    assert!(op.encode().is_err());
}

#[test]
fn unopened_handles_wrong_arity_and_huge_names_are_refused() {
    let mut b = CiscBuilder::new();
    let d = b.input(vec![1]);
    b.append(FileRef::Handle(2), d);
    assert!(matches!(
        b.build(),
        Err(CiscError::HandleUnopened {
            command: 0,
            handle: 2
        })
    ));
    let mut b = CiscBuilder::new();
    let d = b.input(vec![1]);
    b.process(Stage::Xor, &[d]);
    assert!(matches!(b.build(), Err(CiscError::StageArity { .. })));
    let mut b = CiscBuilder::new();
    b.unlink(&"x".repeat(5000));
    assert!(matches!(b.build(), Err(CiscError::PageOverflow { .. })));
}

#[test]
fn a_damaged_page_is_an_error_not_a_panic() {
    let op = append_crc_write(FileRef::Fd(3), vec![1; 64], TxGrain::Macro).unwrap();
    let page = op.encode().unwrap();
    let buffers = || vec![vec![1u8; 64]];
    let mut unknown = page.clone();
    unknown[16 + 8 + 32 + 6] = 0; // the CRC command's stage: now a user stage with no name
    assert!(CiscOp::decode(&unknown, buffers()).is_err());
    let mut opcode = page.clone();
    opcode[16 + 8] = 0x12;
    let e = CiscOp::decode(&opcode, buffers()).unwrap_err();
    assert!(e.to_string().contains("unknown opcode"), "{e}");
    assert!(CiscOp::decode(&page[..10], buffers()).is_err());
    assert!(CiscOp::decode(&page, vec![]).is_err());
    // Every single-byte corruption of the used part decodes to an op or a named error.
    for at in 0..op.encoded_len() {
        for v in [0u8, 1, 0x7f, 0xff] {
            let mut p = page.clone();
            p[at] = v;
            if let Ok(decoded) = CiscOp::decode(&p, buffers()) {
                decoded.validate().unwrap();
            }
        }
    }
}

#[test]
fn stage_names_parse_back() {
    for s in [
        "crc32",
        "compress",
        "decompress",
        "search",
        "sort",
        "xor",
        "multiply",
    ] {
        assert_eq!(Stage::parse(s).unwrap().name(), s);
    }
    assert_eq!(Stage::parse("t:f").unwrap().name(), "t:f");
    assert!(Stage::parse("nosuch").is_none());
    assert!(Stage::parse(":f").is_none());
}

proptest::proptest! {
    /// Any page and buffers decode to a valid op or a named error, never a panic; and any
    /// op that decodes encodes back to the same page.
    #[test]
    fn arbitrary_pages_decode_to_a_valid_op_or_an_error(
        mut page in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
        buffers in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8), 0..3),
        header in proptest::prelude::any::<[u8; 6]>(),
    ) {
        // Often a plausible header, so decoding gets past the magic.
        if page.len() >= 16 && header[0] % 2 == 0 {
            page[..4].copy_from_slice(b"CISC");
            page[4] = 1;
            page[5] = header[1] % 2;
            page[6] = header[2] % 8;
            page[7] = buffers.len() as u8;
            page[8] = header[3] % 32;
            page[9] = 0;
        }
        if let Ok(op) = CiscOp::decode(&page, buffers) {
            op.validate().unwrap();
            let again = op.encode().unwrap();
            let buffers = op.inputs.iter().map(|(_, d)| d.clone()).collect();
            proptest::prop_assert_eq!(CiscOp::decode(&again, buffers).unwrap(), op);
        }
    }
}
