//! Whole numbers in request bodies, as JSON Schema reads them: `80.0` is the integer `80`
//! (the OpenAPI document says `type: integer`, which admits both spellings), so an integer
//! field takes either; a fraction, a negative number or a number out of the field's range is
//! still refused with serde's own words (`invalid value: integer `70000`, expected u16`).
//!
//! Use as `#[serde(deserialize_with = "whole::int")]`, or `whole::opt` with
//! `#[serde(default)]` for an `Option`.

use std::marker::PhantomData;

use serde::de::{Deserializer, Error, Unexpected, Visitor};
use serde::Deserialize;

/// An unsigned integer of type `T`, spelled as a JSON integer or a whole float.
struct Whole<T>(T);

impl<'de, T: TryFrom<u64>> Deserialize<'de> for Whole<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V<T>(PhantomData<T>);
        impl<T: TryFrom<u64>> V<T> {
            fn fit<E: Error>(v: u64) -> Result<Whole<T>, E> {
                T::try_from(v)
                    .map(Whole)
                    .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &Self(PhantomData)))
            }
        }
        impl<T: TryFrom<u64>> Visitor<'_> for V<T> {
            type Value = Whole<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                let name = std::any::type_name::<T>();
                f.write_str(name.rsplit("::").next().unwrap_or(name))
            }
            fn visit_u64<E: Error>(self, v: u64) -> Result<Self::Value, E> {
                Self::fit(v)
            }
            fn visit_i64<E: Error>(self, v: i64) -> Result<Self::Value, E> {
                match u64::try_from(v) {
                    Ok(v) => Self::fit(v),
                    Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
                }
            }
            fn visit_f64<E: Error>(self, v: f64) -> Result<Self::Value, E> {
                // Below 2^64 (exactly representable), with no fraction.
                if v.fract() == 0.0 && (0.0..18_446_744_073_709_551_616.0).contains(&v) {
                    Self::fit(v as u64)
                } else {
                    Err(E::invalid_type(Unexpected::Float(v), &self))
                }
            }
        }
        deserializer.deserialize_any(V(PhantomData))
    }
}

/// An unsigned integer field.
pub fn int<'de, D: Deserializer<'de>, T: TryFrom<u64>>(deserializer: D) -> Result<T, D::Error> {
    Whole::<T>::deserialize(deserializer).map(|w| w.0)
}

/// An optional unsigned integer field (`null` or absent: `None`; absent needs
/// `#[serde(default)]`).
pub fn opt<'de, D: Deserializer<'de>, T: TryFrom<u64>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    Option::<Whole<T>>::deserialize(deserializer).map(|o| o.map(|w| w.0))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Size {
        #[serde(deserialize_with = "super::int")]
        cols: u16,
        #[serde(default, deserialize_with = "super::opt")]
        limit: Option<u64>,
    }

    fn parse(json: &str) -> Result<Size, serde_json::Error> {
        serde_json::from_str::<Size>(json)
    }

    #[test]
    fn whole_floats_are_integers_and_everything_else_is_refused() {
        let s = parse(r#"{"cols": 80}"#).unwrap();
        assert_eq!((s.cols, s.limit), (80, None));
        let s = parse(r#"{"cols": 80.0, "limit": 5.0}"#).unwrap();
        assert_eq!((s.cols, s.limit), (80, Some(5)));
        assert_eq!(parse(r#"{"cols": 1, "limit": null}"#).unwrap().limit, None);
        for (bad, want) in [
            (
                r#"{"cols": 80.5}"#,
                "invalid type: floating point `80.5`, expected u16",
            ),
            (
                r#"{"cols": 70000}"#,
                "invalid value: integer `70000`, expected u16",
            ),
            (
                r#"{"cols": 70000.0}"#,
                "invalid value: integer `70000`, expected u16",
            ),
            (
                r#"{"cols": -1}"#,
                "invalid value: integer `-1`, expected u16",
            ),
            (
                r#"{"cols": -1.0}"#,
                "invalid type: floating point `-1.0`, expected u16",
            ),
            (
                r#"{"cols": "8"}"#,
                "invalid type: string \"8\", expected u16",
            ),
            (r#"{"cols": 1, "limit": 1e300}"#, "expected u64"),
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains(want), "{bad}: {err}");
        }
    }
}
