//! [`RowEntry`]: the fields a `sessions_list` row shows, read from an entry's stored text
//! without building it (issue 17, cold rows: parsing each kept field into an owned
//! `serde_json::Value`, strings copied and nested objects made into maps, then reading them
//! back, was most of a listing whose rows were not remembered). Strings are borrowed from the
//! stored text where it has no escapes; numbers are kept as the `serde_json::Number` a full
//! parse makes (so they are written back byte for byte as before); of the objects `origin` and
//! `deliveryContext` only their scalar members a row reads are kept.
//!
//! It owns this parse and nothing else: it never decides what a row shows (`list.rs` and the
//! `entry` helpers do, through [`RowFields`]), and reads no field outside `ROW_FIELDS`.

use std::borrow::Cow;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Number;

use super::list::{ROW_FIELDS, ROW_SET};
use crate::entry::{RowFields, Scalar};

/// The object fields whose members a row reads, and those members.
const OBJECTS: [&str; 2] = ["origin", "deliveryContext"];
const MEMBERS: [&str; 5] = ["label", "channel", "to", "accountId", "threadId"];

/// A kept value: a scalar (a string borrowed when it can be), or the mark of an object or array.
#[derive(Debug, Clone, PartialEq)]
enum Slot<'a> {
    Str(Cow<'a, str>),
    Num(Number),
    Bool(bool),
    Null,
    /// an array, or an object whose members are not kept
    Composite,
    /// an object of [`OBJECTS`]: its members are in `RowEntry::members`
    Object,
}

impl Slot<'_> {
    fn scalar(&self) -> Scalar<'_> {
        match self {
            Slot::Str(s) => Scalar::Str(s),
            Slot::Num(n) => Scalar::Num(n),
            Slot::Bool(b) => Scalar::Bool(*b),
            Slot::Null => Scalar::Null,
            Slot::Composite | Slot::Object => Scalar::Composite,
        }
    }
}

type Members<'a> = [Option<Slot<'a>>; MEMBERS.len()];

/// The `ROW_FIELDS` of one stored entry, borrowed from its text where possible.
#[derive(Debug)]
pub struct RowEntry<'a> {
    slots: [Option<Slot<'a>>; ROW_FIELDS.len()],
    members: [Members<'a>; OBJECTS.len()],
}

impl<'a> RowEntry<'a> {
    /// Reads the row fields of the stored entry text `json` (the whole text is checked as JSON;
    /// fields a row does not show are read past).
    pub fn parse(json: &'a str) -> Result<RowEntry<'a>, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(json);
        let entry = serde::Deserializer::deserialize_map(&mut de, EntryVisitor)?;
        de.end()?;
        Ok(entry)
    }
}

impl RowFields for RowEntry<'_> {
    fn scalar(&self, name: &str) -> Option<Scalar<'_>> {
        self.slots[ROW_SET.index(name)?].as_ref().map(Slot::scalar)
    }

    fn member(&self, object: &str, name: &str) -> Option<Scalar<'_>> {
        let o = OBJECTS.iter().position(|o| *o == object)?;
        if !matches!(self.slots[ROW_SET.index(object)?], Some(Slot::Object)) {
            return None;
        }
        self.members[o][MEMBERS.iter().position(|m| *m == name)?].as_ref().map(Slot::scalar)
    }
}

/// A member or field name: borrowed from the text when it has no escapes.
struct Name<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for Name<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Name<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a field name")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Name(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Name(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = RowEntry<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an entry object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<RowEntry<'de>, A::Error> {
        let mut e = RowEntry { slots: Default::default(), members: Default::default() };
        while let Some(Name(k)) = a.next_key()? {
            let Some(i) = ROW_SET.index(&k) else {
                a.next_value::<IgnoredAny>()?;
                continue;
            };
            // a repeated field: the last one wins, as in a full parse
            e.slots[i] = Some(match OBJECTS.iter().position(|o| *o == k) {
                Some(o) => {
                    e.members[o] = Default::default();
                    a.next_value_seed(SlotSeed(Some(&mut e.members[o])))?
                }
                None => a.next_value_seed(SlotSeed(None))?,
            });
        }
        Ok(e)
    }
}

/// Reads one value into a [`Slot`]; an object's kept members into the given [`Members`].
struct SlotSeed<'m, 'de>(Option<&'m mut Members<'de>>);

impl<'de> DeserializeSeed<'de> for SlotSeed<'_, 'de> {
    type Value = Slot<'de>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Slot<'de>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SlotSeed<'_, 'de> {
    type Value = Slot<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Slot<'de>, E> {
        Ok(Slot::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Slot<'de>, E> {
        Ok(Slot::Num(v.into()))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Slot<'de>, E> {
        Ok(Slot::Num(v.into()))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Slot<'de>, E> {
        // as serde_json's `Value` reads it
        Ok(Number::from_f64(v).map_or(Slot::Null, Slot::Num))
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Slot<'de>, E> {
        Ok(Slot::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Slot<'de>, E> {
        Ok(Slot::Str(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Slot<'de>, E> {
        Ok(Slot::Str(Cow::Owned(v)))
    }
    fn visit_unit<E>(self) -> Result<Slot<'de>, E> {
        Ok(Slot::Null)
    }
    fn visit_none<E>(self) -> Result<Slot<'de>, E> {
        Ok(Slot::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Slot<'de>, A::Error> {
        while a.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Slot::Composite)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Slot<'de>, A::Error> {
        let Some(members) = self.0 else {
            while a.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
            return Ok(Slot::Composite);
        };
        while let Some(Name(k)) = a.next_key()? {
            match MEMBERS.iter().position(|m| *m == k) {
                Some(i) => members[i] = Some(a.next_value_seed(SlotSeed(None))?),
                None => {
                    a.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Slot::Object)
    }
}

#[cfg(test)]
#[path = "list_row_tests.rs"]
mod tests;
