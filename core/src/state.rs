//! Portable state: a compact, versioned binary encoding of a limiter's state.
//!
//! ```text
//! "rk"  version  algorithm  fingerprint (4 bytes LE)  state fields (LEB128 varints)
//! ```
//!
//! The fingerprint is a 32-bit FNV-1a hash of the algorithm and every
//! configuration value, so state only goes back into a limiter configured
//! the same way. The state fields are each algorithm's own (a GCRA: its
//! latest time and used tolerance), as unsigned LEB128.

use crate::Error;

/// The newest format version this build writes and reads: 2, written only
/// for a state carrying the refund bound a reconfigure sets (a fixed or
/// sliding-window counter's, a leaky bucket's), so that a build reading
/// version 1 only refuses it as another version rather than misreading it;
/// every other state is written as version 1, as it always was.
pub const STATE_VERSION: u8 = 2;

const MAGIC: [u8; 2] = *b"rk";
const HEADER: usize = 8;

/// The most bytes a state takes, and the most [`Portable::restore`] reads
/// of its input: the header, then the numbers of a full sliding-window log
/// of the largest limit (its latest time and its length, then two per
/// entry, for twice the limit of entries), 10 bytes each at most; every
/// other state is a few numbers. Input longer than this is never a state,
/// and its first `MAX_STATE_LEN + 1` bytes are answered as the whole: a
/// host that must copy the input first (the WebAssembly build, into its
/// memory, which holds 4 GiB at most and never shrinks) copies no more.
pub const MAX_STATE_LEN: usize = HEADER + MAX_NUMBERS * 10;

/// The most numbers a state holds (see [`MAX_STATE_LEN`]), for the largest
/// log limit, 2^20: `sliding_window_log.rs` checks it against
/// `MAX_LOG_LIMIT`.
pub(crate) const MAX_NUMBERS: usize = 2 + 2 * (2 << 20);

/// A limiter whose state can be written to bytes and read back, into a
/// limiter of the same configuration, in this process or another (another
/// language's binding, a Redis value, a file, a browser's storage).
///
/// Restoring checks everything: truncated input fails with
/// [`Error::StateTruncated`], malformed input or values no limiter could
/// hold with [`Error::StateCorrupt`], another format version with
/// [`Error::StateVersion`], another algorithm or configuration with
/// [`Error::StateMismatch`]. A failed restore leaves the limiter unchanged,
/// and no input panics. The configuration is told by a 32-bit fingerprint:
/// a check against mistakes (one other configuration in 2^32 passes it, and
/// one can be searched for), not against bytes forged on purpose, whose
/// values are still checked as any state's are.
///
/// ```
/// # #[cfg(feature = "alloc")] {
/// use ratekeeper::{Gcra, Limiter, Nanos, Portable};
///
/// let mut gcra = Gcra::new(3, Nanos::from_secs(1)).unwrap();
/// assert!(gcra.try_acquire(Nanos::from_secs(10), 2).unwrap().allowed);
/// let bytes = gcra.to_bytes();
/// assert_eq!(bytes.len(), 8 + 5 + 5); // header, latest time, used tolerance
///
/// let mut elsewhere = Gcra::new(3, Nanos::from_secs(1)).unwrap();
/// elsewhere.restore(&bytes).unwrap();
/// assert_eq!(elsewhere, gcra);
///
/// let mut other = Gcra::new(4, Nanos::from_secs(1)).unwrap();
/// assert_eq!(other.restore(&bytes).unwrap_err().code(), "state_mismatch");
/// # }
/// ```
///
/// Sealed: every limiter of this crate is `Portable` (through a blanket
/// implementation over a supertrait no other crate can name), and no other
/// type can be. The bytes are a format shared with the other languages'
/// bindings and versioned by [`STATE_VERSION`]: a type of yours could not
/// keep to it, and its encoding may gain fields in a minor release.
///
/// ```compile_fail,E0277
/// use ratekeeper::Portable;
///
/// #[derive(Clone)]
/// struct Mine;
///
/// impl Portable for Mine {}
/// ```
pub trait Portable: codec::Codec + Clone {
    /// The length of [`encode`](Portable::encode)'s output.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn encoded_len(&self) -> usize {
        self.encode(&mut []).unwrap_or_else(|needed| needed)
    }

    /// Writes the state into `out`, returning the length written, or
    /// `Err(needed)` (writing nothing useful) when `out` is too short.
    ///
    /// A state is 8 bytes of header and 1 to 10 bytes per field, so a
    /// buffer sized once holds any state of a type: 28 bytes for a
    /// [`Gcra`](crate::Gcra) (two fields).
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn encode(&self, out: &mut [u8]) -> Result<usize, usize> {
        let mut w = codec::Writer { out, len: 0 };
        w.bytes(&MAGIC);
        w.byte(self.version());
        w.byte(self.tag());
        let mut fingerprint = codec::Fingerprint::new(self.tag());
        self.config(&mut fingerprint);
        w.bytes(&fingerprint.finish().to_le_bytes());
        self.write_state(&mut w);
        if w.len > w.out.len() {
            return Err(w.len);
        }
        Ok(w.len)
    }

    /// The state as a new vector of bytes.
    #[cfg(feature = "alloc")]
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn to_bytes(&self) -> alloc::vec::Vec<u8> {
        let mut out = alloc::vec![0; self.encoded_len()];
        let len = self.encode(&mut out).unwrap_or(0);
        out.truncate(len);
        out
    }

    /// Replaces this limiter's state with the one `bytes` hold.
    #[cfg_attr(ratekeeper_size, optimize(size))]
    fn restore(&mut self, bytes: &[u8]) -> Result<(), Error> {
        // Short input that is not the start of a state (`{}`, a JSON text
        // read by mistake) is corrupt, not merely cut short.
        let magic = bytes.iter().zip(MAGIC).all(|(b, m)| *b == m);
        if bytes.len() < HEADER && magic {
            return Err(Error::StateTruncated);
        }
        if !magic {
            return Err(Error::StateCorrupt {
                reason: "it does not start with ratekeeper's magic bytes",
            });
        }
        if !(1..=STATE_VERSION).contains(&bytes[2]) {
            return Err(Error::StateVersion {
                found: bytes[2],
                supported: STATE_VERSION,
            });
        }
        if bytes[3] != self.tag() {
            return Err(Error::StateMismatch {
                reason: "another algorithm",
            });
        }
        let mut fingerprint = codec::Fingerprint::new(self.tag());
        self.config(&mut fingerprint);
        if bytes[4..HEADER] != fingerprint.finish().to_le_bytes() {
            return Err(Error::StateMismatch {
                reason: "a limiter of another configuration",
            });
        }
        let (fields, version) = (&bytes[HEADER..], bytes[2]);
        // Checked whole first, then read into `self`, so that a failed
        // restore changes nothing without a copy of the limiter to read
        // into: a log's copy is its ring, 32 MiB at the largest limit, and
        // the WebAssembly build's memory keeps the peak for good.
        let mut r = codec::Reader {
            bytes: fields,
            version,
        };
        self.check_state(&mut r)?;
        if !r.bytes.is_empty() {
            return Err(Error::StateCorrupt {
                reason: "bytes follow the last field",
            });
        }
        // Passes the checks again: they depend only on the bytes and the
        // configuration, which reading leaves as it is.
        self.read_state(&mut codec::Reader {
            bytes: fields,
            version,
        })
    }
}

impl<T: codec::Codec + Clone> Portable for T {}

/// The encoding's building blocks, implemented by each algorithm and
/// sealed: only this crate's limiters are [`Portable`].
pub(crate) mod codec {
    use crate::Error;

    /// How an algorithm writes and reads its state.
    pub trait Codec: Clone {
        /// The algorithm's tag in the header.
        fn tag(&self) -> u8;
        /// The format version of this state (see [`crate::STATE_VERSION`]).
        fn version(&self) -> u8 {
            1
        }
        /// Feeds every configuration value to the fingerprint.
        fn config(&self, fingerprint: &mut Fingerprint);
        /// Writes the state fields.
        fn write_state(&self, w: &mut Writer<'_>);
        /// Reads the state fields into `self`, checking every invariant the
        /// algorithm relies on. Called only on fields that passed
        /// [`check_state`](Codec::check_state), so it need not leave `self`
        /// as it was when it fails.
        fn read_state(&mut self, r: &mut Reader<'_>) -> Result<(), Error>;
        /// Reads the state fields as [`read_state`](Codec::read_state)
        /// does, failing as it does, without changing `self`: into a copy,
        /// a few numbers (a log reads its entries into nothing instead).
        fn check_state(&self, r: &mut Reader<'_>) -> Result<(), Error> {
            self.clone().read_state(r)
        }
    }

    /// Writes into a slice, counting (without storing) what does not fit.
    pub struct Writer<'a> {
        pub(super) out: &'a mut [u8],
        pub(super) len: usize,
    }

    impl Writer<'_> {
        pub fn byte(&mut self, b: u8) {
            if let Some(slot) = self.out.get_mut(self.len) {
                *slot = b;
            }
            self.len += 1;
        }

        pub fn bytes(&mut self, bytes: &[u8]) {
            for &b in bytes {
                self.byte(b);
            }
        }

        /// Unsigned LEB128: 7 bits per byte, low bits first.
        pub fn varint(&mut self, mut v: u64) {
            while v >= 0x80 {
                self.byte(v as u8 | 0x80);
                v >>= 7;
            }
            self.byte(v as u8);
        }
    }

    /// Reads from a slice the fields of a state of format `version`.
    pub struct Reader<'a> {
        pub(super) bytes: &'a [u8],
        pub(super) version: u8,
    }

    impl Reader<'_> {
        pub fn varint(&mut self) -> Result<u64, Error> {
            let mut value: u64 = 0;
            for i in 0..10 {
                let (&b, rest) = self.bytes.split_first().ok_or(Error::StateTruncated)?;
                self.bytes = rest;
                let bits = (b & 0x7f) as u64;
                if i == 9 && b > 1 {
                    return Err(corrupt("a number does not fit in 64 bits"));
                }
                value |= bits << (7 * i);
                if b & 0x80 == 0 {
                    // The shortest form only (`80 00` is 0 spelt long), so
                    // that bytes a state was read from are the bytes it writes.
                    if b == 0 && i > 0 {
                        return Err(corrupt("a number is not in its shortest form"));
                    }
                    return Ok(value);
                }
            }
            Err(corrupt("a number does not fit in 64 bits"))
        }

        /// The refund bound a reconfigure sets, at most `max`: a last
        /// varint that a version-2 state holds and a version-1 state does
        /// not (read as 0, no bound). Told apart by the version, not by
        /// where the bytes end, so that a version-2 state cut before its
        /// bound is refused as truncated, rather than read as a state never
        /// reconfigured (whose refunds would give back units the counts
        /// carried over no longer hold), and a version-1 state followed by
        /// a bound is refused for the bytes after its last field.
        pub fn refund_bound_at_most(&mut self, max: u64) -> Result<u64, Error> {
            if self.version < 2 {
                return Ok(0);
            }
            self.at_most(max)
        }

        /// A varint that must be at most `max`.
        pub fn at_most(&mut self, max: u64) -> Result<u64, Error> {
            let value = self.varint()?;
            if value > max {
                return Err(corrupt("a value is out of range for this configuration"));
            }
            Ok(value)
        }
    }

    /// The error for a field no limiter could hold.
    pub fn corrupt(reason: &'static str) -> Error {
        Error::StateCorrupt { reason }
    }

    /// 32-bit FNV-1a over the tag and configuration values.
    pub struct Fingerprint(u32);

    impl Fingerprint {
        pub(super) fn new(tag: u8) -> Fingerprint {
            let mut f = Fingerprint(0x811c_9dc5);
            f.byte(tag);
            f
        }

        fn byte(&mut self, b: u8) {
            self.0 = (self.0 ^ b as u32).wrapping_mul(0x0100_0193);
        }

        /// Adds a configuration value.
        pub fn word(&mut self, v: u64) {
            for b in v.to_le_bytes() {
                self.byte(b);
            }
        }

        pub(super) fn finish(&self) -> u32 {
            self.0
        }
    }
}
