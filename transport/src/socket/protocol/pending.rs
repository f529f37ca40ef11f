//! Pending answers: which request id awaits which answer ([`Answer`]), and the caller's
//! slot its answer lands in. An answer to no outstanding request, or of another kind or
//! length than its request awaits, is a malformed frame: the caller refuses it and never
//! delivers it.

use std::collections::HashMap;

use super::frame::Answer;

/// The requests of one connection that wait for an answer, by id, each with the slot
/// (`S`, the caller's) its answer lands in.
pub(in crate::socket) struct PendingAnswers<S> {
    by_id: HashMap<u64, (Answer, S)>,
}

impl<S> Default for PendingAnswers<S> {
    fn default() -> Self {
        PendingAnswers {
            by_id: HashMap::new(),
        }
    }
}

impl<S> PendingAnswers<S> {
    /// Records that request `id` awaits `awaits`, landing in `slot`.
    pub(in crate::socket) fn expect(&mut self, id: u64, awaits: Answer, slot: S) {
        self.by_id.insert(id, (awaits, slot));
    }

    /// Whether no request awaits an answer.
    #[cfg(test)]
    pub(in crate::socket) fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Forgets request `id` (it was never sent): its slot, if it was pending.
    pub(in crate::socket) fn cancel(&mut self, id: u64) -> Option<S> {
        self.by_id.remove(&id).map(|(_, s)| s)
    }

    /// Takes the request that a RESPONSE for `id` carrying `data` bytes answers: what it
    /// awaited and its slot, or why the RESPONSE is malformed.
    pub(in crate::socket) fn response(
        &mut self,
        id: u64,
        data: usize,
    ) -> Result<(Answer, S), String> {
        let (awaits, slot) = self
            .by_id
            .remove(&id)
            .ok_or_else(|| format!("a response to request {id}, which is not outstanding"))?;
        awaits.check_response(id, data)?;
        Ok((awaits, slot))
    }

    /// Takes the request that a FLUSHED for `id` answers: what it awaited and its slot,
    /// or why the FLUSHED is malformed.
    pub(in crate::socket) fn flushed(&mut self, id: u64) -> Result<(Answer, S), String> {
        let (awaits, slot) = self
            .by_id
            .remove(&id)
            .ok_or_else(|| format!("FLUSHED {id}, which is not outstanding"))?;
        awaits.check_flushed(id)?;
        Ok((awaits, slot))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each answer goes to the request it names, once, and only if it is the answer that
    /// request awaits.
    #[test]
    fn answers_land_only_in_the_request_that_awaits_them() {
        let mut p = PendingAnswers::default();
        p.expect(1, Answer::Data(64), "get");
        p.expect(2, Answer::Value, "fetch-add");
        p.expect(3, Answer::Flushed, "quiet");
        p.expect(4, Answer::Value, "never sent");
        assert_eq!(p.response(1, 64), Ok((Answer::Data(64), "get")));
        let e = p.response(1, 64).unwrap_err();
        assert_eq!(e, "a response to request 1, which is not outstanding");
        assert_eq!(p.flushed(3), Ok((Answer::Flushed, "quiet")));
        let e = p.flushed(2).unwrap_err();
        assert!(
            e.contains("a FLUSHED for request 2, which awaits a RESPONSE"),
            "{e}"
        );
        assert_eq!(p.cancel(4), Some("never sent"));
        let e = p.response(4, 0).unwrap_err();
        assert!(e.contains("not outstanding"), "{e}");
        let e = p.flushed(9).unwrap_err();
        assert_eq!(e, "FLUSHED 9, which is not outstanding");
    }
}
