use std::collections::BTreeSet;

use proptest::prelude::*;
use symmem_bootstrap::auth::JobKey;
use symmem_device::SignalOp;

use super::*;
use crate::ofi::protocol::messages::{encode_ack, encode_goodbye, encode_signal, Signal, HEADER};

fn mac(job: &str) -> Hmac<Sha256> {
    JobKey::derive(job.as_bytes(), "ofi auth test")
        .subkey(KEY_LABEL)
        .hmac_sha256()
}

/// PE `from`'s signal message with 40 bytes of data, sealed to `to` as number `seq`
/// under the key of `job`.
fn sealed_signal(job: &str, from: usize, to: usize, seq: u64) -> Vec<u8> {
    let mut buf = vec![7u8; HEADER + 40];
    encode_signal(
        &mut buf,
        &Signal {
            from,
            op: 9,
            data_off: 64,
            data_len: 40,
            sig_off: 8,
            value: 1,
            sig_op: SignalOp::Add,
            acked: 0,
        },
    );
    Sealer::new(mac(job)).seal(&mut buf, to, seq);
    buf
}

fn verifier(me: usize) -> Verifier {
    Verifier::new(mac("job"), me, 4)
}

/// A message sealed by its sender under the job's key is accepted once, from its
/// sender's endpoint or where the provider names none; so are acknowledgements and
/// goodbyes.
#[test]
fn a_sealed_message_is_accepted_once() {
    let mut v = verifier(2);
    assert_eq!(
        v.check(&sealed_signal("job", 1, 2, 1), Source::Pe(1)),
        Ok(())
    );
    assert_eq!(
        v.check(&sealed_signal("job", 1, 2, 2), Source::Unreported),
        Ok(())
    );
    let sealer = Sealer::new(mac("job"));
    let mut ack = encode_ack(3, 5);
    sealer.seal(&mut ack, 2, 1);
    assert_eq!(v.check(&ack, Source::Pe(3)), Ok(()));
    let mut bye = encode_goodbye(3);
    sealer.seal(&mut bye, 2, 2);
    assert_eq!(v.check(&bye, Source::Pe(3)), Ok(()));
    assert_eq!(v.check(&bye, Source::Pe(3)), Err(Refusal::Replayed(3, 2)));
}

/// A tag that is not the MAC of the message under the job's key is refused: a changed
/// byte anywhere (header, data or tag), another job's key, a message sealed to another
/// PE (reflected), or one claiming another sender.
#[test]
fn a_tampered_or_foreign_message_is_refused() {
    let good = sealed_signal("job", 1, 2, 1);
    for at in [
        0,
        4,
        8,
        SEQ_AT_TEST,
        TAG_AT,
        TAG_AT + 15,
        40,
        72,
        HEADER,
        HEADER + 39,
    ] {
        let mut bad = good.clone();
        bad[at] ^= 0x10;
        let mut v = verifier(2);
        let refused = v.check(&bad, Source::Unreported).unwrap_err();
        assert!(
            matches!(refused, Refusal::BadTag(_) | Refusal::NoSuchSender(_)),
            "byte {at}: {refused:?}"
        );
    }
    let mut v = verifier(2);
    assert_eq!(
        v.check(&sealed_signal("another job", 1, 2, 1), Source::Pe(1)),
        Err(Refusal::BadTag(1))
    );
    // Sealed to PE 3, reflected to PE 2; and back to its sender, PE 1.
    assert_eq!(
        v.check(&sealed_signal("job", 1, 3, 1), Source::Unreported),
        Err(Refusal::BadTag(1))
    );
    assert_eq!(
        verifier(1).check(&sealed_signal("job", 1, 3, 1), Source::Unreported),
        Err(Refusal::BadTag(1))
    );
    assert_eq!(
        v.check(&good[..HEADER + 39], Source::Unreported),
        Err(Refusal::BadTag(1))
    );
    assert_eq!(v.check(&good[..20], Source::Pe(1)), Err(Refusal::Short(20)));
    // The untouched message still passes: nothing above was recorded.
    assert_eq!(v.check(&good, Source::Pe(1)), Ok(()));
}

use crate::ofi::protocol::messages::SEQ_AT as SEQ_AT_TEST;

/// A message whose claimed sender is not the endpoint it came from is refused before its
/// tag is looked at, however well sealed: from another PE's endpoint or from outside the
/// job; so is a sender outside the job.
#[test]
fn a_message_from_another_endpoint_than_its_sender_is_refused() {
    let mut v = verifier(2);
    let good = sealed_signal("job", 1, 2, 1);
    assert_eq!(v.check(&good, Source::Pe(3)), Err(Refusal::WrongSource(1)));
    assert_eq!(
        v.check(&good, Source::Stranger),
        Err(Refusal::WrongSource(1))
    );
    let mut v5 = Verifier::new(mac("job"), 2, 1);
    assert_eq!(
        v5.check(&good, Source::Pe(1)),
        Err(Refusal::NoSuchSender(1))
    );
    assert_eq!(v.check(&good, Source::Pe(1)), Ok(()));
}

/// Sequence numbers: each is accepted once per sender, in any order within the window;
/// 0 never; one further behind the highest than the window, never; each sender and
/// receiver pair counts its own.
#[test]
fn replayed_sequence_numbers_are_refused() {
    let mut v = verifier(2);
    let check = |v: &mut Verifier, from, seq| {
        v.check(&sealed_signal("job", from, 2, seq), Source::Pe(from))
    };
    assert_eq!(check(&mut v, 1, 0), Err(Refusal::Replayed(1, 0)));
    assert_eq!(check(&mut v, 1, 5), Ok(()));
    assert_eq!(check(&mut v, 1, 3), Ok(()));
    assert_eq!(check(&mut v, 1, 3), Err(Refusal::Replayed(1, 3)));
    assert_eq!(check(&mut v, 1, 5), Err(Refusal::Replayed(1, 5)));
    assert_eq!(check(&mut v, 0, 5), Ok(()));
    assert_eq!(check(&mut v, 1, 5 + WINDOW), Ok(()));
    assert_eq!(check(&mut v, 1, 5), Err(Refusal::Replayed(1, 5)));
    assert_eq!(check(&mut v, 1, 6), Ok(()));
    assert_eq!(check(&mut v, 1, 4), Err(Refusal::Replayed(1, 4)));
    let mut seq = Sequences::new(3);
    assert_eq!((seq.next(1), seq.next(1), seq.next(2)), (1, 2, 1));
}

/// The first refusal is logged at once, naming what and where from; the next ones
/// within a second only counted, then told in the next line.
#[test]
fn refusals_are_counted_and_logged_at_most_once_a_second() {
    let mut r = Refusals::new();
    let t = Instant::now();
    let line = r.count(t, &Refusal::BadTag(1), Source::Stranger).unwrap();
    assert!(
        line.contains("claiming PE 1 whose tag is not the job key's"),
        "{line}"
    );
    assert!(line.contains("outside the job's address vector"), "{line}");
    assert_eq!(
        r.count(
            t + Duration::from_millis(500),
            &Refusal::BadTag(1),
            Source::Pe(0)
        ),
        None
    );
    let line = r
        .count(t + Refusals::EVERY, &Refusal::Replayed(0, 3), Source::Pe(0))
        .unwrap();
    assert!(
        line.contains("2 dropped since the last such line, 3 in all"),
        "{line}"
    );
    assert_eq!(r.total, 3);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any change to a sealed message (a flipped bit anywhere, or a cut) is refused.
    #[test]
    fn any_change_to_a_sealed_message_is_refused(bit in 0..(HEADER + 40) * 8, cut in 0..HEADER + 40) {
        let good = sealed_signal("job", 1, 2, 7);
        let mut bad = good.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        prop_assert!(verifier(2).check(&bad, Source::Unreported).is_err());
        prop_assert!(verifier(2).check(&good[..cut], Source::Unreported).is_err());
    }

    /// The window accepts exactly the numbers a set of every accepted number would,
    /// within [`WINDOW`] of the highest, and none older.
    #[test]
    fn the_window_accepts_each_number_once(seqs in proptest::collection::vec(prop_oneof![1..64u64, 1..3 * WINDOW], 1..200)) {
        let mut w = Window::new();
        let mut seen = BTreeSet::new();
        for seq in seqs {
            let highest = seen.last().copied().unwrap_or(0);
            let model = !seen.contains(&seq) && (seq > highest || highest - seq < WINDOW);
            prop_assert_eq!(w.fresh(seq), model, "{}", seq);
            if model {
                w.accept(seq);
                seen.insert(seq);
            }
        }
    }
}
