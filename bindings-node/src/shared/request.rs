//! A policy's request as the JS layer passes it: fields as strings, or
//! written as bytes into the scratch.

use ratekeeper::Error;

use super::type_error;

/// A key, or a field's name or value of a policy's request, as a build
/// receives it from the JS layer outside the scratch: a string, or (a key
/// or a value) the bytes of one that is not UTF-8.
pub trait Part {
    /// The string, when it is one (a field's name always is).
    fn text(&self) -> Option<&str>;
    /// Its bytes: a string's UTF-8, or the bytes themselves.
    fn bytes(&self) -> &[u8];
}

impl Part for String {
    fn text(&self) -> Option<&str> {
        Some(self)
    }

    fn bytes(&self) -> &[u8] {
        self.as_bytes()
    }
}

/// A request from JS: field names and values, alternating. A name of
/// bytes (never passed by the JS layer) is refused.
pub fn request<P: Part>(fields: &[P]) -> Result<Vec<(&str, &[u8])>, Error> {
    fields
        .chunks_exact(2)
        .map(|pair| match pair[0].text() {
            Some(name) => Ok((name, pair[1].bytes())),
            None => Err(type_error(
                "request",
                "an object of strings, numbers and Uint8Arrays",
            )),
        })
        .collect()
}

/// The most fields of a request in bytes ([`with_request_bytes`]) read
/// without an allocation.
const INLINE_FIELDS: usize = 8;

/// Calls `f` with the request whose fields the JS layer wrote as `bytes`
/// (`fieldsInto` in lib/api.cjs): names and values alternating, each its
/// length in one byte, then its ASCII characters. Reading strings through
/// the engine's API (napi's, wasm-bindgen's) took most of a policy's call.
pub fn with_request_bytes<R, E: From<Error>>(
    bytes: &[u8],
    f: impl FnOnce(&[(&str, &[u8])]) -> Result<R, E>,
) -> Result<R, E> {
    let malformed = || Error::InvalidValue {
        name: "request",
        reason: "was written malformed into the scratch",
    };
    // The next string of `rest`, which then starts after it.
    fn next<'a>(rest: &mut &'a [u8]) -> Option<&'a [u8]> {
        let (&len, tail) = rest.split_first()?;
        let (text, tail) = tail.split_at_checked(len.into())?;
        *rest = tail;
        Some(text)
    }
    let mut rest = bytes;
    let mut inline: [(&str, &[u8]); INLINE_FIELDS] = [("", &[]); INLINE_FIELDS];
    let mut spilled = Vec::new();
    let mut count = 0;
    while !rest.is_empty() {
        let name = next(&mut rest).ok_or_else(malformed)?;
        let name = std::str::from_utf8(name).map_err(|_| malformed())?;
        let field = (name, next(&mut rest).ok_or_else(malformed)?);
        match inline.get_mut(count) {
            Some(slot) => *slot = field,
            None => {
                if spilled.is_empty() {
                    spilled.extend_from_slice(&inline);
                }
                spilled.push(field);
            }
        }
        count += 1;
    }
    f(if count <= INLINE_FIELDS {
        &inline[..count]
    } else {
        &spilled
    })
}
