//! Where a GPU kernel panicked: the record its panic handler fills before trapping, in the
//! [`ErrorRecord`](crate::state::ErrorRecord) the host reads after the launch failed.
//!
//! A trap leaves no message, so the handler (on nvptx64, in `arch/nvptx.rs`) claims the
//! error record (the first panicking thread wins), writes the panic's location, its block
//! and thread and, when it is a string literal, its message, fences at system scope, and
//! only then sets the error word to [`error_code::PANIC`](crate::state::error_code::PANIC)
//! and traps. The host turns the record into the same error a panic on the CPU executor
//! gives: `kernel failed on PE 0 in block (1, 0, 0) thread (7, 0, 0): panicked at
//! src/lib.rs:12:9: deliberate`.
//!
//! Text is stored byte by byte, up to its recorded length (the bytes after it are left as
//! they were): a loop of one system-scope store per byte is the smallest code, and ptxas
//! copies the handler into every kernel that can panic. A path longer than [`FILE_BYTES`]
//! keeps its end (the file name); a message longer than [`MESSAGE_BYTES`] keeps its start. A formatted message
//! (`panic!("{x}")`, an index out of bounds) is not recorded: formatting it would pull
//! `core::fmt` into every kernel; [`MESSAGE_FORMATTED`] says so instead.
//!
//! ```text
//! offset  field
//!  0      line         u32
//!  4      column       u32
//!  8      block        [u32; 3]  blockIdx
//! 20      thread       [u32; 3]  threadIdx
//! 32      file_len     u32   the path's length in bytes (more than FILE_BYTES: truncated)
//! 36      message_len  u32   the message's length, or MESSAGE_FORMATTED
//! 40      file         [u8; 112] the path's last FILE_BYTES bytes
//! 152     message      [u8; 128] the message's first MESSAGE_BYTES bytes
//! 280                          (size)
//! ```

use core::fmt;

use crate::geometry::Dim3;

/// Bytes of a panic's file path the record keeps (its end).
pub const FILE_BYTES: usize = 112;

/// Bytes of a panic's message the record keeps (its start).
pub const MESSAGE_BYTES: usize = 128;

/// The most text bytes of one field.
const TEXT_BYTES: usize = if FILE_BYTES > MESSAGE_BYTES {
    FILE_BYTES
} else {
    MESSAGE_BYTES
};

/// [`PanicRecord::message_len`] of a message that was formatted at run time (not recorded).
pub const MESSAGE_FORMATTED: u32 = u32::MAX;

/// A kernel panic as the device reports it: part of the error record in host-mapped memory.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PanicRecord {
    /// Line of the panic.
    pub line: u32,
    /// Column of the panic.
    pub column: u32,
    /// `blockIdx` of the panicking thread, as x, y, z.
    pub block: [u32; 3],
    /// `threadIdx` of the panicking thread, as x, y, z.
    pub thread: [u32; 3],
    /// Length of the file path in bytes; more than [`FILE_BYTES`] when only its end is kept.
    pub file_len: u32,
    /// Length of the message in bytes, or [`MESSAGE_FORMATTED`].
    pub message_len: u32,
    /// The path's last [`FILE_BYTES`] bytes (those past `file_len` are not written).
    pub file: [u8; FILE_BYTES],
    /// The message's first [`MESSAGE_BYTES`] bytes (those past `message_len` are not
    /// written).
    pub message: [u8; MESSAGE_BYTES],
}

// The table above is read by host code built separately from the PTX: check it.
const _: () = {
    use core::mem::{align_of, offset_of, size_of};
    assert!(size_of::<PanicRecord>() == 280);
    assert!(align_of::<PanicRecord>() == 4);
    assert!(offset_of!(PanicRecord, line) == 0);
    assert!(offset_of!(PanicRecord, column) == 4);
    assert!(offset_of!(PanicRecord, block) == 8);
    assert!(offset_of!(PanicRecord, thread) == 20);
    assert!(offset_of!(PanicRecord, file_len) == 32);
    assert!(offset_of!(PanicRecord, message_len) == 36);
    assert!(offset_of!(PanicRecord, file) == 40);
    assert!(offset_of!(PanicRecord, message) == 152);
};

impl Default for PanicRecord {
    fn default() -> Self {
        bytemuck::Zeroable::zeroed()
    }
}

/// A panic, as the handler sees it: what [`write()`] records.
#[derive(Debug, Clone, Copy)]
pub struct PanicSite<'a> {
    /// The file path of the panic.
    pub file: &'a str,
    /// Its line.
    pub line: u32,
    /// Its column.
    pub column: u32,
    /// `blockIdx` of the panicking thread.
    pub block: Dim3,
    /// `threadIdx` of the panicking thread.
    pub thread: Dim3,
    /// The message, when it is a string literal (`None`: formatted at run time).
    pub message: Option<&'a str>,
}

/// How the device stores into the record: 32-bit words and bytes (on the GPU, relaxed
/// system-scope stores: the host reads the record after the kernel trapped).
#[derive(Clone, Copy)]
pub struct Stores {
    /// Stores a `u32` at an aligned address.
    pub word: unsafe fn(*mut u32, u32),
    /// Stores a byte.
    pub byte: unsafe fn(*mut u8, u8),
}

/// Writes `site` into `rec` with `stores`.
///
/// # Safety
/// `rec` must be valid for writes of a [`PanicRecord`]; `stores` must store at the
/// addresses they are given.
#[inline(always)]
pub unsafe fn write(rec: *mut PanicRecord, site: &PanicSite<'_>, stores: Stores) {
    let path = site.file.as_bytes();
    let kept_path = &path[path.len().saturating_sub(FILE_BYTES)..];
    let message = site.message.map_or(&[][..], str::as_bytes);
    let kept_message = &message[..message.len().min(MESSAGE_BYTES)];
    let message_len = match site.message {
        Some(m) => m.len().min(MESSAGE_FORMATTED as usize - 1) as u32,
        None => MESSAGE_FORMATTED,
    };
    let store = stores.word;
    // SAFETY: every address is a field of `*rec`, which the caller lends for writes; the
    // kept texts are no longer than their fields.
    unsafe {
        use core::ptr::addr_of_mut;
        store(addr_of_mut!((*rec).line), site.line);
        store(addr_of_mut!((*rec).column), site.column);
        // Field by field: an array of the two to loop over would live in local memory.
        let block = addr_of_mut!((*rec).block).cast::<u32>();
        store(block, site.block.x);
        store(block.add(1), site.block.y);
        store(block.add(2), site.block.z);
        let thread = addr_of_mut!((*rec).thread).cast::<u32>();
        store(thread, site.thread.x);
        store(thread.add(1), site.thread.y);
        store(thread.add(2), site.thread.z);
        store(
            addr_of_mut!((*rec).file_len),
            path.len().min(u32::MAX as usize) as u32,
        );
        store(addr_of_mut!((*rec).message_len), message_len);
        let file = addr_of_mut!((*rec).file).cast::<u8>();
        for (i, &b) in kept_path.iter().enumerate() {
            (stores.byte)(file.add(i), b);
        }
        let text = addr_of_mut!((*rec).message).cast::<u8>();
        for (i, &b) in kept_message.iter().enumerate() {
            (stores.byte)(text.add(i), b);
        }
    }
}

impl PanicRecord {
    /// The recorded bytes of the file path (its end) and whether they are all of it.
    pub fn file_bytes(&self) -> (impl Iterator<Item = u8> + '_, bool) {
        let whole = self.file_len as usize <= FILE_BYTES;
        (
            self.file.iter().copied().take(self.file_len as usize),
            whole,
        )
    }

    /// The recorded bytes of the message (its start) and whether they are all of it;
    /// `None` for a message formatted at run time, which is not recorded.
    pub fn message_bytes(&self) -> Option<(impl Iterator<Item = u8> + '_, bool)> {
        (self.message_len != MESSAGE_FORMATTED).then(|| {
            let whole = self.message_len as usize <= MESSAGE_BYTES;
            (
                self.message.iter().copied().take(self.message_len as usize),
                whole,
            )
        })
    }
}

/// Writes `bytes` as text: UTF-8 where it is, U+FFFD for the rest (a truncation can cut
/// a character in two).
fn write_lossy(f: &mut fmt::Formatter<'_>, bytes: impl Iterator<Item = u8>) -> fmt::Result {
    let mut buf = [0u8; TEXT_BYTES];
    let mut len = 0;
    for b in bytes {
        buf[len] = b;
        len += 1;
    }
    for chunk in buf[..len].utf8_chunks() {
        f.write_str(chunk.valid())?;
        if !chunk.invalid().is_empty() {
            f.write_str("\u{FFFD}")?;
        }
    }
    Ok(())
}

/// `panicked at <file>:<line>:<column>: <message>`, as Rust's own panic message says it
/// (`…` marks a cut: the start of a long path, the end of a long message).
impl fmt::Display for PanicRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("panicked at ")?;
        let (file, whole) = self.file_bytes();
        if !whole {
            f.write_str("…")?;
        }
        write_lossy(f, file)?;
        write!(f, ":{}:{}: ", self.line, self.column)?;
        match self.message_bytes() {
            Some((text, whole)) => {
                write_lossy(f, text)?;
                if !whole {
                    f.write_str("…")?;
                }
                Ok(())
            }
            None => f.write_str("(a formatted message, which a GPU does not record)"),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use std::string::{String, ToString};

    use super::*;

    /// Plain stores, as the host's stand-in for the device's system-scope ones.
    fn stores() -> Stores {
        unsafe fn word(p: *mut u32, v: u32) {
            // SAFETY: `write` passes addresses of the record it was lent.
            unsafe { p.write(v) }
        }
        unsafe fn byte(p: *mut u8, v: u8) {
            // SAFETY: as for `word`.
            unsafe { p.write(v) }
        }
        Stores { word, byte }
    }

    /// The record the device writes for `site`.
    fn recorded(site: &PanicSite<'_>) -> PanicRecord {
        let mut rec = PanicRecord {
            line: 7,
            file: [0xff; FILE_BYTES],
            message: [0xff; MESSAGE_BYTES],
            ..PanicRecord::default()
        };
        // SAFETY: `rec` is a live record; `store` stores.
        unsafe { write(&mut rec, site, stores()) };
        rec
    }

    fn site<'a>(file: &'a str, message: Option<&'a str>) -> PanicSite<'a> {
        PanicSite {
            file,
            line: 42,
            column: 9,
            block: Dim3::new(1, 2, 3),
            thread: Dim3::new(7, 0, 1),
            message,
        }
    }

    #[test]
    fn a_short_panic_reads_back_whole() {
        let rec = recorded(&site("src/lib.rs", Some("deliberate")));
        assert_eq!((rec.line, rec.column), (42, 9));
        assert_eq!((rec.block, rec.thread), ([1, 2, 3], [7, 0, 1]));
        assert_eq!((rec.file_len, rec.message_len), (10, 10));
        // Bytes past the text are neither written nor read.
        assert_eq!(rec.file[10], 0xff);
        assert_eq!(rec.to_string(), "panicked at src/lib.rs:42:9: deliberate");
    }

    #[test]
    fn a_long_path_keeps_its_file_name() {
        let path: String = "d/".repeat(100) + "kernels/src/lib.rs";
        let rec = recorded(&site(&path, Some("x")));
        assert_eq!(rec.file_len as usize, path.len());
        let (bytes, whole) = rec.file_bytes();
        assert!(!whole);
        let kept: String = bytes.map(char::from).collect();
        assert_eq!(kept, path[path.len() - FILE_BYTES..]);
        let text = rec.to_string();
        assert!(text.starts_with("panicked at …d/d/"), "{text}");
        assert!(text.ends_with("kernels/src/lib.rs:42:9: x"), "{text}");
    }

    #[test]
    fn a_long_message_keeps_its_start() {
        let message = "m".repeat(MESSAGE_BYTES) + "tail";
        let rec = recorded(&site("a.rs", Some(&message)));
        assert_eq!(rec.message_len as usize, message.len());
        let text = rec.to_string();
        let want = std::format!("panicked at a.rs:42:9: {}…", "m".repeat(MESSAGE_BYTES));
        assert_eq!(text, want);
    }

    #[test]
    fn a_formatted_message_is_named_not_recorded() {
        let rec = recorded(&site("a.rs", None));
        assert_eq!(rec.message_len, MESSAGE_FORMATTED);
        assert!(rec.message_bytes().is_none());
        assert_eq!(
            rec.to_string(),
            "panicked at a.rs:42:9: (a formatted message, which a GPU does not record)"
        );
    }

    #[test]
    fn a_character_cut_in_two_reads_as_a_replacement() {
        // 127 ASCII bytes, then a 2-byte character whose second byte is cut off.
        let message = "a".repeat(MESSAGE_BYTES - 1) + "é";
        let rec = recorded(&site("a.rs", Some(&message)));
        let text = rec.to_string();
        assert!(text.ends_with("a\u{FFFD}…"), "{text}");
    }
}
