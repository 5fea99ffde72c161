//! Keys of keyed limiters and a policy's requests, as bytes, borrowed
//! where CPython keeps them.

use pyo3::exceptions::{PyUnicodeEncodeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyInt, PyString};
use ratekeeper::Error;
use smallvec::SmallVec;

use super::{index_of, invalid_type, invalid_value};
use crate::errors::{to_py, to_py_with};

const NOT_TEXT: &str = "must be valid Unicode text (no lone surrogates)";
const TOO_MANY_DIGITS: &str = "has more digits than Python writes as text (an int key is its \
                               decimal digits; see sys.set_int_max_str_digits)";

/// A key of a keyed limiter or a value of a policy's request, as bytes:
/// a `str` is its UTF-8, an `int` its decimal digits (so `42` and `"42"`
/// are the same key), `bytes` themselves.
///
/// A `str` or `bytes` key is borrowed where CPython keeps its bytes (for an
/// ASCII `str`, its very characters), for as long as the argument lives:
/// copying it onto the stack (a variable-length copy, then fixed-width
/// loads of what it wrote, which wait for its stores) was a tenth of a
/// keyed `try_acquire`. Digits are owned: short ones on the stack.
#[derive(Clone)]
pub enum Key<'a> {
    Borrowed(&'a [u8]),
    Inline(u8, [u8; INLINE_KEY]),
    Heap(Box<[u8]>),
}

/// The longest key a [`Key`] owns on the stack.
const INLINE_KEY: usize = 46;

impl<'a> Key<'a> {
    fn new(bytes: &[u8]) -> Key<'static> {
        if bytes.len() <= INLINE_KEY {
            let mut inline = [0; INLINE_KEY];
            inline[..bytes.len()].copy_from_slice(bytes);
            Key::Inline(bytes.len() as u8, inline)
        } else {
            Key::Heap(bytes.into())
        }
    }

    /// `obj` as a key; the error names the argument `name`.
    fn from_py(obj: &'a Bound<'_, PyAny>, name: &'static str) -> PyResult<Key<'a>> {
        Key::from_py_raising(obj, name, |err| to_py(obj.py(), err))
    }

    /// [`Key::from_py`], raising its own errors (about `name`) as `raise`
    /// makes them: a request's field names its value's errors itself.
    fn from_py_raising(
        obj: &'a Bound<'_, PyAny>,
        name: &'static str,
        raise: impl Fn(Error) -> PyErr,
    ) -> PyResult<Key<'a>> {
        if let Ok(text) = obj.cast::<PyString>() {
            return Ok(Key::Borrowed(utf8_raising(text, name, &raise)?));
        }
        if let Ok(bytes) = obj.cast::<PyBytes>() {
            return Ok(Key::Borrowed(bytes.as_bytes()));
        }
        let int = if obj.is_instance_of::<PyInt>() {
            (!obj.is_instance_of::<PyBool>()).then(|| obj.clone())
        } else {
            index_of(obj).map(Bound::into_any)
        };
        if let Some(int) = int {
            return Ok(match int.extract::<i64>() {
                Ok(int) => Key::new(itoa::Buffer::new().format(int).as_bytes()),
                // Beyond 64 bits: int's own decimal digits (not those of a
                // subclass's __str__).
                Err(_) => {
                    let digits = obj
                        .py()
                        .get_type::<PyInt>()
                        .call_method1(intern!(obj.py(), "__str__"), (&int,))
                        .map_err(|err| match err.is_instance_of::<PyValueError>(obj.py()) {
                            // More digits than Python writes: no key to read.
                            true => raise(invalid_value(name, TOO_MANY_DIGITS)),
                            false => err,
                        })?;
                    Key::new(utf8_raising(
                        &digits.cast_into::<PyString>()?,
                        name,
                        &raise,
                    )?)
                }
            });
        }
        Err(raise(invalid_type(name, "a str, bytes or int")))
    }
}

/// The UTF-8 bytes CPython keeps with `text`, or `None` with its exception
/// pending (a lone surrogate has no UTF-8; or a `MemoryError`).
#[inline(always)]
fn utf8_pending<'a>(text: &'a Bound<'_, PyString>) -> Option<&'a [u8]> {
    let mut size: pyo3::ffi::Py_ssize_t = 0;
    // SAFETY: `text` is a str, and the GIL is held (a `Bound`).
    let data = unsafe { pyo3::ffi::PyUnicode_AsUTF8AndSize(text.as_ptr(), &mut size) };
    if data.is_null() {
        return None;
    }
    // SAFETY: CPython returned `size` bytes at `data`, owned by `text` and
    // unchanged while it lives (a str is immutable).
    Some(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), size as usize) })
}

/// [`utf8_pending`], with the exception cleared when there are no bytes
/// (raised again, in our words, by [`utf8_raising`]).
#[inline(always)]
fn utf8_of<'a>(text: &'a Bound<'_, PyString>) -> Option<&'a [u8]> {
    let bytes = utf8_pending(text);
    if bytes.is_none() {
        drop(PyErr::take(text.py()));
    }
    bytes
}

/// The UTF-8 bytes of `text`, which CPython keeps with the string (for an
/// ASCII string, its very characters). A `str` that is not text (one with a
/// lone surrogate, such as `"\udc80"`) has no UTF-8: `invalid_value` naming
/// the argument `name`, where `str.encode` raises `UnicodeEncodeError`.
fn utf8<'a>(text: &'a Bound<'_, PyString>, name: &'static str) -> PyResult<&'a [u8]> {
    utf8_raising(text, name, |err| to_py(text.py(), err))
}

/// [`utf8`], raising its own error as `raise` makes it.
fn utf8_raising<'a>(
    text: &'a Bound<'_, PyString>,
    name: &'static str,
    raise: impl Fn(Error) -> PyErr,
) -> PyResult<&'a [u8]> {
    if let Some(bytes) = utf8_pending(text) {
        return Ok(bytes);
    }
    let py = text.py();
    let err = PyErr::fetch(py);
    if err.is_instance_of::<PyUnicodeEncodeError>(py) {
        return Err(raise(invalid_value(name, NOT_TEXT)));
    }
    Err(err) // anything else (MemoryError) as it is
}

/// The str argument `name`: [`text`], or `invalid_type` for anything else.
pub fn string<'a>(obj: &'a Bound<'_, PyAny>, name: &'static str) -> PyResult<&'a str> {
    match obj.cast::<PyString>() {
        Ok(s) => text(s, name),
        Err(_) => Err(to_py(obj.py(), invalid_type(name, "a str"))),
    }
}

/// A `str` argument `name` as Rust text, borrowed from the string. A lone
/// surrogate raises `RateLimitError` (`invalid_value`) naming `name`, never
/// a bare `UnicodeEncodeError`. Read `str` arguments through here (or
/// [`utf8`]) rather than with `to_cow`.
pub fn text<'a>(text: &'a Bound<'_, PyString>, name: &'static str) -> PyResult<&'a str> {
    let bytes = utf8(text, name)?;
    // CPython's UTF-8 of a str is always valid; checked rather than trusted.
    std::str::from_utf8(bytes).map_err(|_| to_py(text.py(), invalid_value(name, NOT_TEXT)))
}

impl AsRef<[u8]> for Key<'_> {
    #[inline]
    fn as_ref(&self) -> &[u8] {
        match self {
            Key::Borrowed(bytes) => bytes,
            Key::Inline(len, bytes) => &bytes[..*len as usize],
            Key::Heap(bytes) => bytes,
        }
    }
}

/// A keyed limiter's `key`.
pub fn key<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<Key<'a>> {
    Key::from_py(obj, "key")
}

/// The target argument of a deciding method (a key, a request), converted
/// in the method's body: `hold` reads `obj`, keeping in `slot` what the
/// target needs that `obj` does not hold. A conversion returned from a
/// function (as `from_py_with` calls one) crossed memory as a whole, and
/// the copy's wide loads waited for the narrow stores that wrote it (a
/// failed store forwarding): an eighth of a keyed decision.
pub trait Held<'a>: Sized {
    type Target: ?Sized;
    /// Where a conversion keeps what `obj` does not hold.
    type Slot: Default;
    fn hold(obj: &'a Bound<'_, PyAny>, slot: &'a mut Self::Slot) -> PyResult<&'a Self::Target>;
}

/// What a key's conversion keeps: an `int`'s digits, or a [`Key`].
#[derive(Default)]
pub struct KeySlot<'a> {
    digits: itoa::Buffer,
    key: Option<Key<'a>>,
}

impl<'a> Held<'a> for Key<'a> {
    type Target = [u8];
    type Slot = KeySlot<'a>;

    /// A `str` or `bytes` itself, the usual keys, borrowed, and an `int`
    /// itself written once, in place, without a [`Key`].
    #[inline(always)]
    fn hold(obj: &'a Bound<'_, PyAny>, slot: &'a mut KeySlot<'a>) -> PyResult<&'a [u8]> {
        if let Some(bytes) = usual_key(obj, &mut slot.digits) {
            return Ok(bytes);
        }
        let held: &'a Key<'a> = slot.key.insert(key(obj)?);
        Ok(held.as_ref())
    }
}

/// The bytes of a usual key, without a [`Key`]: a `str` or `bytes` itself,
/// borrowed, or an `int` of 64 bits written into `digits`; `None` for any
/// other (a subclass, a big int, a `str` that is not text), which
/// [`Key::from_py`] reads or refuses.
#[inline(always)]
fn usual_key<'a>(obj: &'a Bound<'_, PyAny>, digits: &'a mut itoa::Buffer) -> Option<&'a [u8]> {
    if let Ok(text) = obj.cast_exact::<PyString>() {
        utf8_of(text)
    } else if obj.is_exact_instance_of::<PyInt>() {
        let int = obj.extract::<i64>().ok()?;
        Some(digits.format(int).as_bytes())
    } else if let Ok(bytes) = obj.cast_exact::<PyBytes>() {
        Some(bytes.as_bytes())
    } else {
        None
    }
}

impl<'a> Held<'a> for Option<Request> {
    type Target = Request;
    type Slot = Request;

    /// Built in the call's slot: a request returned, wrapped in a `Result`
    /// and an `Option`, was copied whole at each step.
    #[inline(always)]
    fn hold(obj: &'a Bound<'_, PyAny>, slot: &'a mut Request) -> PyResult<&'a Request> {
        if obj.is_none() {
            return Ok(&NO_FIELDS);
        }
        slot.fill(obj)?;
        Ok(slot)
    }
}

/// A policy's request: its fields' names and values, end to end in one
/// buffer, so that a request of a few short fields allocates nothing and
/// is small to move.
#[derive(Clone, Default)]
pub struct Request {
    bytes: SmallVec<[u8; 96]>,
    /// Where each field's name ends, then its value, in `bytes`.
    ends: SmallVec<[(u32, u32); FIELDS]>,
}

/// The fields a request holds without allocating.
pub const FIELDS: usize = 4;

impl Request {
    /// Calls `f` with the fields as the core takes them. Pushed in place
    /// and lent, not returned: a returned list is moved (136 bytes, by
    /// `memcpy`) on every call.
    #[inline(always)]
    pub fn with_fields<R>(&self, f: impl FnOnce(&[(&str, &[u8])]) -> R) -> R {
        let mut fields = SmallVec::<[(&str, &[u8]); FIELDS]>::new();
        let mut start = 0;
        for &(name_end, value_end) in &self.ends {
            let (name_end, value_end) = (name_end as usize, value_end as usize);
            let name = &self.bytes[start..name_end];
            // SAFETY: `fill`, the only writer, leaves whole fields only (it
            // takes back what a failed read wrote), each name from a `&str`.
            let name = unsafe { std::str::from_utf8_unchecked(name) };
            start = value_end;
            fields.push((name, &self.bytes[name_end..value_end]));
        }
        f(&fields)
    }

    /// Reads the fields of the mapping `obj` into this request; on an
    /// error, leaves it as it was, so that every byte it holds belongs to a
    /// whole field (`with_fields` relies on it: names are UTF-8).
    fn fill(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let (bytes, ends) = (self.bytes.len(), self.ends.len());
        let filled = self.fill_from(obj);
        if filled.is_err() {
            self.bytes.truncate(bytes);
            self.ends.truncate(ends);
        }
        filled
    }

    /// [`Request::fill`], leaving what it wrote on an error.
    fn fill_from(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = obj.py();
        let wrong_type = || {
            let expected = "a mapping of str field names to str, bytes or int values, or None";
            to_py(py, invalid_type("request", expected))
        };
        // The items are taken first and converted after: a conversion may
        // run Python code (an int subclass's `__index__`), which must not
        // change a dict under its iterator. A dict is read in place
        // (`PyDict_Next`), without the list of tuples `items()` makes.
        let items: SmallVec<[_; FIELDS]> = match obj.cast::<PyDict>() {
            Ok(dict) => dict.iter().collect(),
            Err(_) => match obj.cast::<pyo3::types::PyMapping>() {
                // Another mapping's items() may hold anything: what is not
                // pairs is no request, in our words (not pyo3's bare error).
                Ok(mapping) => mapping
                    .items()?
                    .iter()
                    .map(|item| item.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| wrong_type())?,
                Err(_) => return Err(wrong_type()),
            },
        };
        let too_long = || to_py(py, invalid_value("request", "is over 4 GiB"));
        let mut digits = itoa::Buffer::new();
        for (field, value) in &items {
            let field = field.cast::<PyString>().map_err(|_| wrong_type())?;
            let name = text(field, "request")?;
            // A usual value as the key of a keyed limiter is read (`Held`):
            // a `Key` returned crossed memory as a whole, loaded wider than
            // it was stored (a failed store forwarding).
            let other;
            let value = match usual_key(value, &mut digits) {
                Some(bytes) => bytes,
                None => {
                    other =
                        Key::from_py_raising(value, "request", |err| of_field(err, name, value))?;
                    other.as_ref()
                }
            };
            self.bytes.extend_from_slice(name.as_bytes());
            let name_end = u32::try_from(self.bytes.len()).map_err(|_| too_long())?;
            self.bytes.extend_from_slice(value);
            let value_end = u32::try_from(self.bytes.len()).map_err(|_| too_long())?;
            self.ends.push((name_end, value_end));
        }
        Ok(())
    }
}

/// The request of no fields.
static NO_FIELDS: Request = Request {
    bytes: SmallVec::new_const(),
    ends: SmallVec::new_const(),
};

/// A request given or not (`None`: no fields).
impl AsRef<Request> for Option<Request> {
    fn as_ref(&self) -> &Request {
        self.as_ref().unwrap_or(&NO_FIELDS)
    }
}

/// A policy's `request`: a mapping of field names (`str`) to values (`str`,
/// `bytes` or `int`), or `None` for no fields.
pub fn request(obj: &Bound<'_, PyAny>) -> PyResult<Option<Request>> {
    if obj.is_none() {
        return Ok(None);
    }
    let mut request = Request::default();
    request.fill(obj)?;
    Ok(Some(request))
}

/// `err`, about a value of the argument `request`, said of its field `field`
/// (`request['user']`, as the Redis policy says it), whose value is `value`:
/// which of a request's values was wrong, and (for a wrong type) what it was.
fn of_field(err: Error, field: &str, value: &Bound<'_, PyAny>) -> PyErr {
    // Python's repr of a str without quotes or backslashes in it; others as
    // Rust writes them, close enough for a message.
    let quoted = if field.contains(['\'', '\\']) {
        format!("{field:?}")
    } else {
        format!("'{field}'")
    };
    let mut words = err.display_with(&format!("request[{quoted}]")).to_string();
    if let (Error::InvalidType { .. }, Ok(kind)) = (&err, value.get_type().name()) {
        words = format!("{words}, not {kind}");
    }
    to_py_with(value.py(), err, words)
}
