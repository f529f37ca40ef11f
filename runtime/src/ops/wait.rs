//! Point-to-point synchronization: waiting on and testing symmetric integers that peers
//! update (OpenSHMEM 1.5 §9.10: `wait_until`, `test` and their `_all`, `_any`, `_some`
//! and `_vector` forms).
//!
//! All forms read this PE's own copy with Acquire loads, so whatever a peer wrote before
//! its Release update (put_signal, atomic_set, a fence followed by an update) is visible
//! once the condition holds. Waits back off (spin, yield, sleep) and fail, naming the
//! peer, if a peer dies, and after `SYMMEM_TIMEOUT` when one is set.
//!
//! On a GPU heap the words are read with small device-to-host copies, polled under the
//! same backoff (each poll costs a copy, ~10 µs, instead of a load).
//!
//! Array forms take a whole allocation of `ivars` and an optional `exclude` mask (the
//! OpenSHMEM `status` array: `true` leaves an element out). The `_any` forms are fair:
//! each call starts scanning after the element the thread's previous call returned.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use crate::error::{Error, Result};
use crate::route::Word;
use crate::runtime::Runtime;
use crate::sym::{SymBuf, SymRef};
use symmem_transport::int::{Cmp, SymInt};

/// The comparison value(s) of an array wait: one for all, or one per element.
#[derive(Clone, Copy)]
enum Values<'a, T> {
    One(T),
    Each(&'a [T]),
}

impl<T: Copy> Values<'_, T> {
    #[inline]
    fn get(&self, i: usize) -> T {
        match self {
            Values::One(v) => *v,
            Values::Each(vs) => vs[i],
        }
    }
}

/// A validated view of this PE's `ivars` for the array forms.
struct Ivars<'a, T: SymInt> {
    rt: &'a Runtime,
    op: &'static str,
    words: Vec<Word<'a, T>>,
    exclude: Option<&'a [bool]>,
    cmp: Cmp,
    values: Values<'a, T>,
}

impl<T: SymInt> Ivars<'_, T> {
    fn included(&self, i: usize) -> bool {
        self.exclude.is_none_or(|e| !e[i])
    }

    fn holds(&self, i: usize) -> Result<bool> {
        let v = self.rt.path.load_word(self.op, &self.words[i])?;
        Ok(self.cmp.holds(v, self.values.get(i)))
    }

    fn all(&self) -> Result<bool> {
        for i in 0..self.words.len() {
            if self.included(i) && !self.holds(i)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// An included element that holds, scanning from where this thread's last `any`
    /// stopped, so that repeated calls return every element that holds in turn rather
    /// than the first one forever (the spec's `shmem_test_any` example relies on it).
    fn any(&self) -> Result<Option<usize>> {
        thread_local! {
            static NEXT_START: Cell<usize> = const { Cell::new(0) };
        }
        let n = self.words.len();
        let start = NEXT_START.with(Cell::get) % n.max(1);
        for i in (start..n).chain(0..start) {
            if self.included(i) && self.holds(i)? {
                NEXT_START.with(|c| c.set(i + 1));
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    fn some(&self) -> Result<Vec<usize>> {
        let mut out = Vec::new();
        for i in 0..self.words.len() {
            if self.included(i) && self.holds(i)? {
                out.push(i);
            }
        }
        Ok(out)
    }

    fn none_included(&self) -> bool {
        (0..self.words.len()).all(|i| !self.included(i))
    }
}

impl Runtime {
    /// Waits on a word by any route until `cmp value` holds; the general (GPU heap) path
    /// of the waits, whose host path is inlined in each.
    pub(crate) fn wait_word<T: SymInt>(
        &self,
        op: &'static str,
        w: &Word<'_, T>,
        what: impl Fn() -> String,
        cmp: Cmp,
        value: T,
    ) -> Result<T> {
        let seen = Cell::new(None);
        let failed = Cell::new(None);
        self.wait_for(
            op,
            || format!("{} {cmp:?} {value:?} (last seen {:?})", what(), seen.get()),
            || match self.path.load_word(op, w) {
                Ok(v) => {
                    seen.set(Some(v));
                    cmp.holds(v, value)
                }
                Err(e) => {
                    failed.set(Some(e));
                    true
                }
            },
        )?;
        match failed.into_inner() {
            Some(e) => Err(e),
            None => Ok(seen.get().expect("the wait ended on a value")),
        }
    }

    fn ivars<'a, T: SymInt>(
        &'a self,
        op: &'static str,
        ivars: &'a SymBuf<T>,
        exclude: Option<&'a [bool]>,
        cmp: Cmp,
        values: Values<'a, T>,
    ) -> Result<Ivars<'a, T>> {
        let n = ivars.len();
        if let Some(e) = exclude.filter(|e| e.len() != n) {
            return Err(Error::InvalidArgument {
                op,
                reason: format!(
                    "exclude mask has {} entries for {n} ivars (allocation #{})",
                    e.len(),
                    ivars.id
                ),
            });
        }
        if let Values::Each(vs) = values {
            if vs.len() != n {
                return Err(Error::InvalidArgument {
                    op,
                    reason: format!(
                        "{} comparison values for {n} ivars (allocation #{})",
                        vs.len(),
                        ivars.id
                    ),
                });
            }
        }
        let words = (0..n)
            .map(|i| self.path.word(op, ivars.at(i), self.my_pe()))
            .collect::<Result<_>>()?;
        Ok(Ivars {
            rt: self,
            op,
            words,
            exclude,
            cmp,
            values,
        })
    }

    /// Waits until this PE's `ivar` satisfies `cmp value`; returns the value seen
    /// (`shmem_wait_until`).
    pub fn wait_until<T: SymInt>(&self, ivar: SymRef<'_, T>, cmp: Cmp, value: T) -> Result<T> {
        let a = match self.path.word("wait_until", ivar, self.my_pe())? {
            Word::Host(a) => a,
            #[allow(unreachable_patterns)] // only with the cuda feature
            w => {
                return self.wait_word(
                    "wait_until",
                    &w,
                    || format!("allocation #{}[{}]", ivar.buf.id, ivar.index),
                    cmp,
                    value,
                )
            }
        };
        let mut seen = value;
        self.wait_for(
            "wait_until",
            || {
                format!(
                    "allocation #{}[{}] {cmp:?} {value:?} (last seen {:?})",
                    ivar.buf.id,
                    ivar.index,
                    T::load(a, Ordering::Relaxed)
                )
            },
            || {
                seen = T::load(a, Ordering::Acquire);
                cmp.holds(seen, value)
            },
        )?;
        Ok(seen)
    }

    /// Whether this PE's `ivar` satisfies `cmp value` now (`shmem_test`).
    ///
    /// Where peers reach this PE through a transport, a test that finds the condition
    /// false drives the transport's progress once, so that a loop of tests (the
    /// OpenSHMEM idiom, with or without a `fence`) applies the peer operations it waits
    /// for on transports that need the target to poll.
    pub fn test<T: SymInt>(&self, ivar: SymRef<'_, T>, cmp: Cmp, value: T) -> Result<bool> {
        let w = self.path.word("test", ivar, self.my_pe())?;
        let mut seen = self.path.load_word("test", &w)?;
        if !cmp.holds(seen, value) {
            if let Some(t) = self.path.transport() {
                t.progress()?;
                seen = self.path.load_word("test", &w)?;
            }
        }
        let held = cmp.holds(seen, value);
        self.tested("test", held, || {
            format!(
                "allocation #{}[{}] {cmp:?} {value:?} (last seen {seen:?})",
                ivar.buf.id, ivar.index
            )
        });
        Ok(held)
    }

    /// Tells the hang report whether a test `op` passed: failing tests in a loop are a
    /// wait ([`crate::hang`]'s test loop); `what` names what was tested.
    #[inline]
    fn tested(&self, op: &'static str, passed: bool, what: impl FnOnce() -> String) {
        if let Some(h) = &self.hang {
            match passed {
                true => h.tests.passed(),
                false => h.tests.missed(op, what),
            }
        }
    }

    fn wait_ivars<R>(
        &self,
        op: &'static str,
        id: u64,
        mut probe: impl FnMut() -> Result<Option<R>>,
    ) -> Result<R> {
        let mut out = None;
        self.wait_for(
            op,
            || format!("ivars of allocation #{id}"),
            || {
                out = probe().transpose();
                out.is_some()
            },
        )?;
        out.expect("the wait ended because the probe succeeded or failed")
    }

    /// The all-form of the array waits: returns when every included element holds.
    fn wait_all_of<T: SymInt>(
        &self,
        op: &'static str,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        values: Values<'_, T>,
    ) -> Result<()> {
        let v = self.ivars(op, ivars, exclude, cmp, values)?;
        self.wait_ivars(op, ivars.id, || Ok(v.all()?.then_some(())))
    }

    /// The any-form: the index of one included element that holds, `None` when every
    /// element is excluded (nothing could ever hold).
    fn wait_any_of<T: SymInt>(
        &self,
        op: &'static str,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        values: Values<'_, T>,
    ) -> Result<Option<usize>> {
        let v = self.ivars(op, ivars, exclude, cmp, values)?;
        if v.none_included() {
            return Ok(None);
        }
        self.wait_ivars(op, ivars.id, || v.any()).map(Some)
    }

    /// The some-form: the indices of every included element that holds once at least one
    /// does; empty when every element is excluded.
    fn wait_some_of<T: SymInt>(
        &self,
        op: &'static str,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        values: Values<'_, T>,
    ) -> Result<Vec<usize>> {
        let v = self.ivars(op, ivars, exclude, cmp, values)?;
        if v.none_included() {
            return Ok(Vec::new());
        }
        self.wait_ivars(op, ivars.id, || {
            Ok(Some(v.some()?).filter(|s| !s.is_empty()))
        })
    }

    /// Waits until every included element satisfies `cmp value` (`shmem_wait_until_all`).
    pub fn wait_until_all<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<()> {
        self.wait_all_of("wait_until_all", ivars, exclude, cmp, Values::One(value))
    }

    /// Waits until some included element satisfies `cmp value` and returns its index;
    /// `None` if every element is excluded (`shmem_wait_until_any`).
    pub fn wait_until_any<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Option<usize>> {
        self.wait_any_of("wait_until_any", ivars, exclude, cmp, Values::One(value))
    }

    /// Waits until at least one included element satisfies `cmp value` and returns the
    /// indices of all that do; empty if every element is excluded (`shmem_wait_until_some`).
    pub fn wait_until_some<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Vec<usize>> {
        self.wait_some_of("wait_until_some", ivars, exclude, cmp, Values::One(value))
    }

    /// [`wait_until_all`](Self::wait_until_all) with one comparison value per element
    /// (`shmem_wait_until_all_vector`).
    pub fn wait_until_all_vector<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<()> {
        self.wait_all_of(
            "wait_until_all_vector",
            ivars,
            exclude,
            cmp,
            Values::Each(values),
        )
    }

    /// [`wait_until_any`](Self::wait_until_any) with one comparison value per element
    /// (`shmem_wait_until_any_vector`).
    pub fn wait_until_any_vector<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Option<usize>> {
        self.wait_any_of(
            "wait_until_any_vector",
            ivars,
            exclude,
            cmp,
            Values::Each(values),
        )
    }

    /// [`wait_until_some`](Self::wait_until_some) with one comparison value per element
    /// (`shmem_wait_until_some_vector`).
    pub fn wait_until_some_vector<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Vec<usize>> {
        self.wait_some_of(
            "wait_until_some_vector",
            ivars,
            exclude,
            cmp,
            Values::Each(values),
        )
    }

    /// Whether every included element satisfies `cmp value` now (`shmem_test_all`).
    pub fn test_all<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<bool> {
        let r = self
            .ivars("test_all", ivars, exclude, cmp, Values::One(value))?
            .all()?;
        self.tested("test_all", r, || {
            format!("ivars of allocation #{}", ivars.id)
        });
        Ok(r)
    }

    /// The index of an included element that satisfies `cmp value` now (`shmem_test_any`).
    pub fn test_any<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Option<usize>> {
        let r = self
            .ivars("test_any", ivars, exclude, cmp, Values::One(value))?
            .any()?;
        self.tested("test_any", r.is_some(), || {
            format!("ivars of allocation #{}", ivars.id)
        });
        Ok(r)
    }

    /// The indices of the included elements that satisfy `cmp value` now (`shmem_test_some`).
    pub fn test_some<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        value: T,
    ) -> Result<Vec<usize>> {
        let r = self
            .ivars("test_some", ivars, exclude, cmp, Values::One(value))?
            .some()?;
        self.tested("test_some", !r.is_empty(), || {
            format!("ivars of allocation #{}", ivars.id)
        });
        Ok(r)
    }

    /// [`test_all`](Self::test_all) with per-element values (`shmem_test_all_vector`).
    pub fn test_all_vector<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<bool> {
        let r = self
            .ivars("test_all_vector", ivars, exclude, cmp, Values::Each(values))?
            .all()?;
        self.tested("test_all_vector", r, || {
            format!("ivars of allocation #{}", ivars.id)
        });
        Ok(r)
    }

    /// [`test_any`](Self::test_any) with per-element values (`shmem_test_any_vector`).
    pub fn test_any_vector<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Option<usize>> {
        let r = self
            .ivars("test_any_vector", ivars, exclude, cmp, Values::Each(values))?
            .any()?;
        self.tested("test_any_vector", r.is_some(), || {
            format!("ivars of allocation #{}", ivars.id)
        });
        Ok(r)
    }

    /// [`test_some`](Self::test_some) with per-element values (`shmem_test_some_vector`).
    pub fn test_some_vector<T: SymInt>(
        &self,
        ivars: &SymBuf<T>,
        exclude: Option<&[bool]>,
        cmp: Cmp,
        values: &[T],
    ) -> Result<Vec<usize>> {
        let r = self
            .ivars(
                "test_some_vector",
                ivars,
                exclude,
                cmp,
                Values::Each(values),
            )?
            .some()?;
        self.tested("test_some_vector", !r.is_empty(), || {
            format!("ivars of allocation #{}", ivars.id)
        });
        Ok(r)
    }
}
